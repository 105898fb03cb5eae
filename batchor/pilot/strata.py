"""A pilot's stratified top-up: rows drawn where a `when:` on the row holds, answers weighted back.

A step that a `when:` lets run on a share p of the rows gets ~pN of the pilot's N rows, and a
top-up of plain sample rows buys it one answer per 1/p rows, each paying the steps above it too
(a pipeline at 30 %: ~3.3 calls per reply). Where every `when:` of the pilot reads only the row
(it is decided for every row before anything runs) and one of them is above all the others, the
top-up draws only rows where that one holds: one answer per row, at the calls of the steps it
runs through (~2 calls per reply). The rows come from a seeded sample `SCAN_ROWS` x N rows large
(the pilot's N rows are its first), in that sample's seeded order: the same seed draws the same
rows, and a larger pilot of the same seed draws the smaller one's rows and more (nested: its
sample starts with the smaller one's, and rows where the `when:` holds are taken in the sample's
one order, not an order of their own per scan, so `--pilot 170` after `--pilot 50` pays only new
rows). The steps above it (that run on every row) then hold more answers from those rows
than their share: their answers are weighted back to the `when:`'s exact share of all rows
(plan/strata.py); the steps below it are sampled evenly within the rows they run on.
Not stratified (the plain top-up of pilot/topup.py): a `when:` that reads an earlier answer
(its share is measured on the rows drawn), two separate `when:`s, fan-outs, SQL steps above one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa

from batchor.pilot.ledger import PilotAttempt
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.steps import Overrides, resolve_steps
from batchor.plan.strata import Reweighting, post_stratified
from batchor.spec.inputs import ROW_KEY, InputReader, input_source
from batchor.spec.load import load_spec
from batchor.spec.templates import StepTemplates
from batchor.state.length_stats import OutputStats, length_fit_sums

SCAN_ROWS = 20
"""Rows of the seeded sample looked through for rows where the `when:` holds, times the pilot's N."""


@dataclass(frozen=True)
class Stratum:
    """Where a row-only `when:` holds: the rows a stratified top-up draws from."""

    step: str  # the step whose `when:` decides it
    when: StepTemplates  # its templates: `should_run` on a row
    spec: Any  # the spec (for the exact share over every input row)
    pilot_keys: tuple[str, ...]  # the pilot's N rows
    inside: frozenset[str]  # of the rows looked through, those where it holds
    candidates: tuple[str, ...]  # beyond the pilot's rows, where it holds, in the seeded order
    weighted_steps: tuple[str, ...]  # LLM steps that run on every row: their answers are weighted back

    @property
    def pilot_inside(self) -> int:
        return sum(1 for key in self.pilot_keys if key in self.inside)

    def keys(self, extra: int) -> list[str]:
        """The pilot's rows and the first `extra` rows where the `when:` holds."""
        return [*self.pilot_keys, *self.candidates[:extra]]


def find_stratum(spec: Any, sampled: CompiledPlan, options: dict[str, Any], most: int) -> Stratum | None:
    """The stratum a pilot's top-up may draw from (at most `most` rows beyond the pilot's), or None
    where the pilot's `when:`s do not allow it (see the module's docstring)."""
    loaded = load_spec(spec)
    _, templates = resolve_steps(
        loaded, Overrides(model=options.get("model"), mock=bool(options.get("mock")), mode=options.get("mode"))
    )
    steps = {s.name: s for s in sampled.header.steps}
    top = stratum_step(steps, templates)
    if top is None:
        return None
    pilot = tuple(k for batch in sampled.iter_batches([ROW_KEY]) for k in batch.column(0).to_pylist())
    seed, scan = sampled.header.input.seed, SCAN_ROWS * len(pilot)
    source = dataclasses.replace(input_source(loaded), sample=scan, seed=seed)
    decided = [key for key, holds in _decided(source, templates[top]) if holds]  # in the sample's seeded order
    inside, taken = frozenset(decided), set(pilot)
    order = [key for key in decided if key not in taken]  # a larger pilot's are the smaller one's and more
    every_row = tuple(s.name for s in steps.values() if not s.local and not _filtered(s.name, steps))
    return Stratum(top, templates[top], spec, pilot, inside, tuple(order[:most]), every_row)


def stratum_step(steps: dict[str, Any], templates: dict[str, StepTemplates]) -> str | None:
    """The one `when:` step above every other, when every `when:` reads only the row, no step fans
    out and no SQL step lies above a `when:`; else None."""
    guarded = [s for s in steps.values() if s.when]
    if not guarded or any(s.fan_out or s.grain for s in steps.values()):
        return None
    if any(s.name not in templates or not templates[s.name].when_reads_only_the_row() for s in guarded):
        return None
    if any(steps[a].local for s in guarded for a in _ancestors(s.name, steps)):
        return None
    tops = [s.name for s in guarded if not any(steps[a].when for a in _ancestors(s.name, steps))]
    return tops[0] if len(tops) == 1 else None


def _ancestors(name: str, steps: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for dep in steps[name].depends_on:
        found |= {dep, *_ancestors(dep, steps)}
    return found


def _filtered(name: str, steps: dict[str, Any]) -> bool:
    return bool(steps[name].when) or any(steps[a].when for a in _ancestors(name, steps))


def _decided(source: Any, when: StepTemplates) -> Iterator[tuple[str, bool]]:
    """Each row of `source` with whether the `when:` holds on it (one that cannot be evaluated runs:
    apply decides it and names the row, as the plan does)."""
    reader = InputReader(source)
    try:
        for batch in reader.batches():
            table = pa.Table.from_batches([batch])
            keys = table.column(ROW_KEY).to_pylist()
            for key, row in zip(keys, table.drop_columns([ROW_KEY]).to_pylist()):
                try:
                    holds = when.should_run({"row": row})
                except Exception:  # noqa: BLE001 - decided during apply, where a failure names the row
                    holds = True
                yield key, holds
    finally:
        reader.close()


def stratum_share(stratum: Stratum) -> float:
    """The share of every input row where the `when:` holds: exact, it reads only the row."""
    rows = held = 0
    for _, holds in _decided(input_source(load_spec(stratum.spec)), stratum.when):
        rows, held = rows + 1, held + holds
    return held / rows if rows else 0.0


def calls_per_row(attempts: list[PilotAttempt], rows_inside: int, steps: int) -> float:
    """Billed calls per row of the stratum so far (every step it runs through; `steps` before any)."""
    calls = sum(1 for a in attempts if a.inside)
    return calls / rows_inside if rows_inside and calls else float(steps)


def reweightings(
    attempts: list[PilotAttempt], stratum: Stratum, share: float, length_keys: dict[str, str]
) -> dict[str, Reweighting]:
    """Per length key of a step that runs on every row, its pilot answers post-stratified."""
    out = {}
    for step in stratum.weighted_steps:
        sides = [_stats([a for a in attempts if a.step == step and a.inside is side]) for side in (True, False)]
        weighted = post_stratified(sides[0], sides[1], share)
        if weighted is not None and step in length_keys:
            out[length_keys[step]] = Reweighting(
                step, sides[0] + sides[1], weighted, share, sides[0].answers, sides[1].answers
            )
    return out


def _stats(attempts: list[PilotAttempt]) -> OutputStats:
    """The ledger's statistics of these attempts (as state/answer_stats.py output_stats counts them)."""
    billed = [a for a in attempts if a.output_tokens > 0 and not a.estimated]
    answers = [a.output_tokens for a in billed if a.outcome == "ok"]
    stats = OutputStats(
        len(answers),
        len(billed),
        sum(answers),
        float(sum(t * t for t in answers)),
        sum(a.output_tokens for a in billed),
        max((a.output_tokens for a in billed), default=0),
        len({(a.run_id, a.request_key) for a in billed}),
        float(sum(t**3 for t in answers)),
        *_stages(billed),
        *(sum(math.log(t) ** k for t in answers) for k in (1, 2, 3)),
    )
    return dataclasses.replace(
        stats,
        **length_fit_sums(
            [(a.counted_input, a.output_tokens) for a in billed if a.outcome == "ok" and a.counted_input > 0]
        ),
    )


def _stages(billed: list[PilotAttempt]) -> tuple[int, ...]:
    """Re-asks in stages, as state/answer_stats.py reask_stats counts them: a request's first
    billed attempt, then its re-asks (rejected again or not, their output, the input they added)."""
    requests: dict[tuple[str, str], list[PilotAttempt]] = {}
    for a in sorted(billed, key=lambda a: a.attempt):
        requests.setdefault((a.run_id, a.request_key), []).append(a)
    firsts = [tries[0] for tries in requests.values()]
    reasks = [(tries[0], a) for tries in requests.values() for a in tries[1:]]
    return (
        len(firsts),
        sum(a.outcome == "invalid_output" for a in firsts),
        sum(a.outcome not in ("ok", "invalid_output") for a in firsts),
        len(reasks),
        sum(a.outcome == "invalid_output" for _, a in reasks),
        sum(a.output_tokens for _, a in reasks),
        sum(a.input_tokens - first.input_tokens for first, a in reasks),
        sum(a.outcome == "truncated" for a in firsts),
        sum(a.outcome == "truncated" for _, a in reasks),
    )
