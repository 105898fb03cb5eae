"""How close the plan is after a pilot: the whole job's expected cost (and its 90 % interval) vs what it spent.

    python benchmarks/pilot_accuracy.py [--rows 400] [--pilot 50|auto] [--sigma 0.6] [--seeds 0-11] [--only pipeline]

For each spec (the example reviews spec; long free-text answers; a pipeline with `when:`), against
the fake provider answering text with log-normal lengths (median 120 words, `--sigma`: 0.6 for
free prose, ~0.35 for answers held to a form) and structured answers from their schema: a pilot
of N rows (batchor.pilot.run_pilot, seeded sample), then the rest. The whole job is the pilot's
spend (known) plus the rest: expected = spend + the calibrated plan's expected rest, the interval
likewise. The fake answers each prompt alike whatever the seed, so the whole job costs the same for
every seed: the first seed runs the rest for real (`rest_measured`), later seeds reuse its whole
cost (actual = the whole cost; their rest = it minus their pilot's spend). Prints a JSON line per
spec and seed: expected, interval, actual, ratio, whether the actual lies in the interval, the
plan's upper bound (pilot included), the requests the fake received from the pilot against its
allowance (N x steps), the pilot's CPU seconds (all of it: its runs included), its local overhead
(its CPU seconds outside its runs: planning the sample and the top-up's bound, re-planning, the
interval; the first seed's includes the process's one-time imports and tokenizer) and wall time.

`--reject 0.2,0.1`: re-asks happen. The fake answers a share (0.2) of structured first asks with
one plausible mistake (a field left out, a rating above its maximum, a word outside its enum, a
list past its maxItems), drawn from the request's text so the whole job is rejected alike on
every run; the re-ask (the rejected answer and the validator's message sent back) is answered
validly but for a share of them (0.1), up to max_attempts. Each step then shows the re-asks per
request and the input tokens per request (re-asks included) the pilot (or history) measured
against the job's; `upper_all_attempts` is the plan's bound if every request used all its attempts.

`--pilot auto`: the pilot of `plan --pilot auto` (batchor/pilot/auto.py): 50 rows, grown (at most
twice) while the whole job's interval is wider than +-10 %; each line says the rows it ended with
(`pilot_rows`), its rounds and why it stopped (`auto`), and `within_10` (|actual/expected - 1| <=
10 %); `size_rows_needed`: the pilot the plan said would reach +-10 % (None: within, or none can).

`--follow-input BETA`: answer lengths that grow with the input's. Each row's text is padded to a
log-normal number of words (median 60, sigma 0.5, drawn per row) and the fake's text answers
have a median of 120 x (prompt words / 60)^BETA words, the same log-normal spread around it
(BETA 0: varied inputs, lengths that do not follow them). With `--history`, the earlier run reads
the same texts cut to half their words (last month's shorter reviews; this month's are longer).

The models are Anthropic and Gemini ones (`--provider openai|anthropic|gemini`: every spec on one
provider's model instead): the fake counts input tokens as characters / 4, which the plan's count
follows once a pilot or history calibrates it (plan/estimate.py: a non-OpenAI model's o200k count
always; an OpenAI model's exact count when the provider's reported input disagrees with it).

`--input-factor F`: the fake bills F times the input it would otherwise report, on every provider
(a server whose input accounting differs from the tokenizer's count): the pilot must calibrate
input as well as output for the plan to meet the bill.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from conftest import make_spec, write_csv  # noqa: E402

from batchor import api  # noqa: E402
from batchor.pilot import run_auto, run_pilot  # noqa: E402
from batchor.plan.summary import reask_upper  # noqa: E402
from batchor.state import open_state, state_location  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402

MEDIAN_WORDS = 120  # text answers: median length in words (log-normal, sigma from the command line)
INPUT_WORDS = 60  # --follow-input: the rows' median length in words, and the fake's reference
FOLLOW: dict[str, Any] = {}  # --follow-input: the fake's text_words_follow (empty: the fake's default)
EXTRA: dict[str, Any] = {}  # --input-factor: the fake's input_token_ratio on every provider
MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}


def reviews(folder: Path, rows: int) -> Path:
    """The committed reviews example on its own data (sampled to `rows`), on Claude."""
    shutil.copytree(ROOT / "examples" / "data", folder / "examples" / "data")
    shutil.copytree(ROOT / "schemas", folder / "schemas")
    (folder / "specs").mkdir()
    spec = yaml.safe_load((ROOT / "specs" / "reviews.yaml").read_text())
    spec["model"] = {**spec["model"], "provider": "anthropic", "name": "claude-haiku-4-5"}
    spec["input"] = {**spec["input"], "limit": rows}
    path = folder / "specs" / "reviews.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def long_text(folder: Path, rows: int) -> Path:
    """Free-text summaries: answer lengths spread widely (the fake's log-normal replies)."""
    path = make_spec(folder, rows=rows, provider="gemini", model="gemini-2.5-flash", schema=None)
    spec = yaml.safe_load(path.read_text())
    spec["model"]["params"]["max_tokens"] = 2000
    spec["steps"] = {
        "summary": {
            "system": "Summarise the review for a support agent.",
            "prompt": "Review: {{ row.text }}",
            "output": "text",
        }
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def long_input(folder: Path, rows: int) -> Path:
    """Long reviews (log-normal, median 400 words) classified in a few tokens: input is most of the
    cost, so an input billed otherwise than counted (--input-factor) moves the bill most here."""
    path = make_spec(folder, rows=rows, provider="gemini", model="gemini-2.5-flash")
    found = []
    for i in range(rows):
        words = round(400 * random.Random(f"long-{i}").lognormvariate(0, 0.5))
        found.append({"id": f"r{i}", "text": " ".join(FILLER[(i + k) % len(FILLER)] for k in range(words))})
    write_csv(folder / "data.csv", found)
    return path


def pipeline(folder: Path, rows: int) -> Path:
    """Classify every ticket, then draft a long reply only where `when:` holds (about 30 %)."""
    write_csv(
        folder / "data.csv",
        [{"id": f"t{i}", "text": f"ticket {i} about order {i * 7919 % 10007}"} for i in range(rows)],
    )
    spec = {
        "version": 1,
        "name": "tickets",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "anthropic", "name": "claude-haiku-4-5", "params": {"max_tokens": 1500}},
        "steps": {
            "triage": {
                "prompt": "Classify: {{ row.text }}",
                "output": {
                    "schema": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["urgent", "topic"],
                        "properties": {"urgent": {"type": "boolean"}, "topic": {"type": "string", "maxLength": 40}},
                    }
                },
            },
            "reply": {"prompt": "Draft a reply to: {{ row.text }} ({{ triage.topic }})", "when": "row.id[-1] in '147'"},
        },
        "output": {"path": "out/tickets.csv"},
        "limits": {"concurrency": 16},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def per_step(plan: Any, run_id: str | None = None) -> dict[str, dict[str, float]]:
    """Per step, what the state's billed attempts so far (of `run_id` only, when given) cost, and
    their answers' output tokens (count, mean, input tokens per answer), re-asks per request and
    input tokens per request (re-asks included): the decomposition of the estimate's error."""
    store = open_state(state_location(None, plan.header.state_location))
    found = store.execute(
        "SELECT step, sum(cost_usd), count(*) FILTER (WHERE outcome = 'ok'), "
        "avg(output_tokens) FILTER (WHERE outcome = 'ok'), "
        "avg(input_tokens) FILTER (WHERE outcome = 'ok'), count(*), "
        "count(DISTINCT request_key), sum(input_tokens) FROM attempts "
        "WHERE cost_usd IS NOT NULL AND (run_id = ? OR ? IS NULL) GROUP BY step",
        [run_id, run_id],
    )
    return {
        str(step): {
            "cost": round(float(cost), 6),
            "answers": int(n),
            "mean_out": round(float(out or 0), 1),
            "mean_in": round(float(inp or 0), 1),
            "reask_rate": round(tries / asked - 1, 4),
            "in_per_request": round(float(tokens_in) / asked, 1),
        }
        for step, cost, n, out, inp, tries, asked, tokens_in in found
    }


def decomposition(
    calibration: Any, pilot: dict[str, dict[str, float]], whole: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Per step: expected (the pilot's spend on it plus the rest's estimate) against actual, and the
    pilot's mean output tokens against the whole job's (where the step's error comes from)."""
    out = {}
    for s in calibration.steps:
        spent, actual = pilot.get(s.step, {}), whole.get(s.step, {})
        expected = spent.get("cost", 0.0) + s.expected
        out[s.step] = {
            "expected": round(expected, 6),
            "actual": actual.get("cost"),
            "ratio": round(actual["cost"] / expected, 4) if actual and expected else None,
            "answers": s.measured.answers,
            "pilot_mean_out": round(s.measured.mean, 1),
            "job_mean_out": actual.get("mean_out"),
            "out_ratio": round(actual["mean_out"] / s.measured.mean, 4) if actual and s.measured.mean else None,
            "pilot_mean_in": spent.get("mean_in"),
            "job_mean_in": actual.get("mean_in"),
            "requests_expected": round(s.requests + spent.get("answers", 0), 1),
            "requests_actual": actual.get("answers"),
            "pilot_reask_rate": round(s.reask_rate, 4),
            "job_reask_rate": actual.get("reask_rate"),
            "pilot_in_per_request": spent.get("in_per_request"),
            "job_in_per_request": actual.get("in_per_request"),
        }
    return out


def measure(
    make: Any,
    rows: int,
    pilot_rows: int | str,
    sigma: float,
    fake: FakeServer,
    seed: int | None = None,
    whole: dict[str, Any] | None = None,
    reject: list[float] | None = None,
) -> dict[str, Any]:
    """One pilot (seeded sample) and the run after it. `whole`: the whole job's cost measured once
    by a plain run of the same spec (the fake answers each prompt alike whatever the seed, so the
    whole job costs the same); given, the rest is not run again."""
    folder = Path(tempfile.mkdtemp(prefix="pilot-bench-"))
    os.chdir(folder)
    spec = make(folder, rows)
    fake.reset(config=True)
    fake.configure(text_words=[MEDIAN_WORDS, sigma], reject_share=reject, **FOLLOW, **EXTRA)
    in_runs = [0.0]
    run = api.apply_compiled

    def timed_run(*args: Any, **kwargs: Any) -> Any:  # the CPU the pilot's runs take (any apply's work)
        began = time.process_time()
        try:
            return run(*args, **kwargs)
        finally:
            in_runs[0] += time.process_time() - began

    cpu, started = time.process_time(), time.perf_counter()
    api.apply_compiled = timed_run  # type: ignore[assignment]
    try:
        if pilot_rows == "auto":  # --pilot auto: 50 rows, grown while the whole job is wider than +-10 %
            auto = run_auto(spec, seed=seed, handle_signals=False)
            piloted, grown = auto.result, {"rounds": [r.rows for r in auto.rounds], "stop": auto.stop}
        else:
            piloted, grown = run_pilot(spec, int(pilot_rows), seed=seed, handle_signals=False), None
    finally:
        api.apply_compiled = run  # type: ignore[assignment]
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    full, calibration = piloted.plan, piloted.calibration
    received = fake.stats()["requests"]
    in_pilot = per_step(full)
    if whole is None:
        rest = api.apply_compiled(full, handle_signals=False).cost_usd
        steps = per_step(full)
    else:
        rest, steps = whole["job_actual"] - piloted.cost_usd, whole["steps_actual"]
    job, low, high = calibration.job
    actual = piloted.cost_usd + rest
    size = piloted.size.to_dict() if piloted.size is not None else {}
    return {
        "spec": make.__name__,
        "rows": full.header.totals.rows,
        "pilot": pilot_rows,
        "sigma": sigma,
        "seed": seed,
        "pilot_rows": piloted.rows,
        "auto": grown,
        "within_10": bool(job and abs(actual / job - 1) <= 0.1),
        "size_rows_needed": size.get("rows_needed"),
        "size_within": size.get("within"),
        "job_expected": round(job, 6),
        "job_interval_90": [round(low, 6), round(high, 6)],
        "job_actual": round(actual, 6),
        "job_ratio": round(actual / job, 4) if job else None,
        "in_interval": low <= actual <= high,
        "rest_ratio": round(rest / calibration.expected, 4) if calibration.expected else None,
        "rest_measured": whole is None,
        "upper": round(full.header.totals.cost_upper + piloted.cost_usd, 6),
        "upper_all_attempts": round(reask_upper(full.header) + piloted.cost_usd, 6),
        "under_upper": actual <= full.header.totals.cost_upper + piloted.cost_usd,
        "reject": reject,
        "pilot_cost": round(piloted.cost_usd, 6),
        "pilot_calls": received,
        "pilot_calls_counted": piloted.calls,
        "pilot_call_bound": piloted.allowance,
        "top_up_rows": [t.rows for t in piloted.top_ups],
        "stratified": piloted.stratified,
        "answers": {s.step: s.measured.answers for s in calibration.steps},
        "pilot_cpu_s": round(cpu, 2),
        "pilot_overhead_cpu_s": round(cpu - in_runs[0], 2),
        "pilot_wall_s": round(elapsed, 2),
        "pilot_run_s": round(piloted.duration_s, 2),
        "steps": decomposition(calibration, in_pilot, steps),
        "steps_actual": steps,
    }


def other_number(digits: str, draw: random.Random) -> str:
    """Another number of as many digits."""
    return str(draw.randrange(10 ** (len(digits) - 1) if len(digits) > 1 else 0, 10 ** len(digits)))


def other_rows(spec: Path, rows: int, seed: int, folder: Path) -> Path:
    """`rows` rows like the spec's input, each a new request: a row's text with its numbers redrawn
    (as many digits) and its words rotated (a seeded draw per row, other for each `seed`), under a
    key of its own (ending in the same character). The same kind of words keeps the characters per
    token, so the earlier run's reported input calibrates the job's input as a run on other rows of
    the same kind would (a marker such as a hashed number reads as other tokens). A rotated text
    never reads as one of the job's; a text of one word cannot be rotated: its row is left out."""
    import csv

    from batchor.spec.load import load_spec

    loaded = load_spec(spec)
    key = loaded.spec.input.key if isinstance(loaded.spec.input.key, str) else loaded.spec.input.key[0]
    with Path(loaded.resolve(loaded.spec.input.path)).open(newline="", encoding="utf-8") as handle:
        original = list(csv.DictReader(handle))
    target = folder / f"earlier-{seed}.csv"
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(original[0]))
        writer.writeheader()
        for i in range(rows):
            row, draw = dict(original[i % len(original)]), random.Random(f"{seed}-{i}")
            words = re.sub(r"\d+", lambda m, d=draw: other_number(m[0], d), row["text"]).split()
            words = words[: max(2, len(words) // 2)] if FOLLOW else words  # last month's: shorter
            turn = draw.randrange(1, max(2, len(words)))
            rotated = " ".join(words[turn:] + words[:turn])
            if rotated != row["text"]:
                row[key], row["text"] = f"h{seed}-{i}-{row[key]}", rotated
                writer.writerow(row)
    return target


def measure_history(
    make: Any,
    rows: int,
    sigma: float,
    fake: FakeServer,
    seed: int,
    whole: dict[str, Any] | None = None,
    reject: list[float] | None = None,
) -> dict[str, Any]:
    """No pilot: an earlier run of the same spec on `rows` other rows (other_rows: every row a new
    request, its words the same as a row of the job's; `seed` draws other rows),
    then the plan of the job learning from its answers (`history: N answers`) against the job's
    cost (run for real once, `whole`: the job's rows are the same for every seed)."""
    from batchor.pilot import calibrated

    folder = Path(tempfile.mkdtemp(prefix="pilot-bench-history-"))
    os.chdir(folder)
    spec = make(folder, rows)
    fake.reset(config=True)
    fake.configure(text_words=[MEDIAN_WORDS, sigma], reject_share=reject, **FOLLOW, **EXTRA)
    earlier = api.plan(spec, other_rows(spec, rows, seed, folder), limit=rows, save=False)
    api.apply_compiled(earlier, output=str(folder / "earlier.csv"), handle_signals=False)
    planned = api.plan(spec, save=False)
    interval = calibrated(planned)
    job = planned.header.totals.cost_expected
    if whole is None:
        ran = api.apply_compiled(planned, handle_signals=False)
        actual, steps = ran.cost_usd, per_step(planned, ran.run_id)
    else:
        actual, steps = whole["job_actual"], whole["steps_actual"]
    sources = sorted({s.output_source for s in planned.header.steps if s.provider != "sql"})
    return {
        "spec": make.__name__,
        "mode": "history",
        "rows": planned.header.totals.rows,
        "sigma": sigma,
        "seed": seed,
        "job_expected": round(job, 6),
        "job_interval_90": [round(interval.low, 6), round(interval.high, 6)],
        "job_actual": round(actual, 6),
        "job_ratio": round(actual / job, 4) if job else None,
        "in_interval": interval.low <= actual <= interval.high,
        "upper": round(planned.header.totals.cost_upper, 6),
        "upper_all_attempts": round(reask_upper(planned.header), 6),
        "under_upper": actual <= planned.header.totals.cost_upper,
        "reject": reject,
        "sources": sources,
        "answers": {s.step: s.measured.answers for s in interval.steps},
        "steps": {
            s.step: {
                "expected": round(s.expected, 6),
                "actual": steps.get(s.step, {}).get("cost"),
                "history_reask_rate": round(s.reask_rate, 4),
                "job_reask_rate": steps.get(s.step, {}).get("reask_rate"),
                "job_in_per_request": steps.get(s.step, {}).get("in_per_request"),
            }
            for s in interval.steps
        },
        "steps_actual": steps,
    }


def varied(make: Any) -> Any:
    """`make` with each input row's text padded to a log-normal number of words (--follow-input)."""
    import csv

    def made(folder: Path, rows: int) -> Path:
        spec = make(folder, rows)
        data = folder / "data.csv"
        if data.exists():  # the reviews example keeps its own texts (its answers are structured)
            with data.open(newline="", encoding="utf-8") as handle:
                found = list(csv.DictReader(handle))
            for i, row in enumerate(found):
                words = round(INPUT_WORDS * random.Random(f"words-{i}").lognormvariate(0, 0.5))
                row["text"] += "".join(f" {FILLER[(i + k) % len(FILLER)]}" for k in range(words))
            write_csv(data, found)
        return spec

    made.__name__ = make.__name__
    return made


FILLER = (
    "the",
    "order",
    "arrived",
    "late",
    "and",
    "the",
    "box",
    "was",
    "damaged",
    "so",
    "I",
    "asked",
    "for",
    "a",
    "refund",
    "twice",
    "without",
    "an",
    "answer",
)


def on_provider(make: Any, provider: str) -> Any:
    """`make` with the spec's model on `provider` (--provider)."""

    def made(folder: Path, rows: int) -> Path:
        spec = make(folder, rows)
        data = yaml.safe_load(spec.read_text())
        data["model"] = {**data["model"], "provider": provider, "name": MODELS[provider]}
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        return spec

    made.__name__ = make.__name__
    return made


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--pilot", default="50", help="pilot rows, or `auto` (50 rows grown to +-10 %%: --pilot auto)")
    parser.add_argument("--sigma", type=float, default=0.6, help="log-normal sigma of text answer lengths")
    parser.add_argument("--seeds", default="0", help="pilot sample seeds, e.g. 0-11")
    parser.add_argument("--only", action="append", choices=[m.__name__ for m in SPECS])
    parser.add_argument(
        "--history", action="store_true", help="no pilot: plan from an earlier run of the same spec on other rows"
    )
    parser.add_argument(
        "--reject",
        default=None,
        metavar="FIRST[,AGAIN]",
        help="shares of structured first answers (and of re-asks) the fake answers with one "
        "plausible mistake, so re-asks happen (e.g. 0.2,0.1)",
    )
    parser.add_argument(
        "--follow-input",
        type=float,
        default=None,
        metavar="BETA",
        help="varied input lengths, and text answers whose median grows as (input words / 60)^BETA",
    )
    parser.add_argument("--provider", choices=sorted(MODELS), default=None, help="every spec on this provider")
    parser.add_argument(
        "--input-factor", type=float, default=None, metavar="F", help="the fake bills F x the input (all providers)"
    )
    args = parser.parse_args()
    if args.input_factor is not None:
        EXTRA["input_token_ratio"] = dict.fromkeys(MODELS, args.input_factor)
    if args.follow_input is not None:
        FOLLOW["text_words_follow"] = [args.follow_input, INPUT_WORDS]
    reject = [float(x) for x in (args.reject + ",0").split(",")[:2]] if args.reject else None
    pilot: int | str = args.pilot if args.pilot == "auto" else int(args.pilot)
    with FakeServer.start({}) as fake:
        os.environ.update(
            ANTHROPIC_API_KEY="sk-ant-bench-123456",
            ANTHROPIC_BASE_URL=fake.anthropic_base_url,
            GEMINI_API_KEY="gemini-bench-123456",
            GOOGLE_GEMINI_BASE_URL=fake.gemini_base_url,
            OPENAI_API_KEY="sk-bench-123456",
            OPENAI_BASE_URL=fake.openai_base_url,
        )
        for make in SPECS:
            if args.only and make.__name__ not in args.only:
                continue
            whole, make = None, varied(make) if FOLLOW else make
            make = on_provider(make, args.provider) if args.provider else make
            for n, seed in enumerate(seeds(args.seeds)):
                result = (
                    measure_history(make, args.rows, args.sigma, fake, seed, whole, reject)
                    if args.history
                    else measure(make, args.rows, pilot, args.sigma, fake, seed, whole, reject)
                )
                print(json.dumps(result), flush=True)
                if n == 0:  # the first seed ran the rest for real: the whole job's cost, for the others
                    whole = result


SPECS = (reviews, long_text, pipeline, long_input)


if __name__ == "__main__":
    main()
