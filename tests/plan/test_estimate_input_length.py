"""Answer lengths that grow with the input's, through the real SDK and the fake: last month's
short reviews predict this month's long ones once the plan regresses length on input length
(plan/length_fit.py); where lengths do not follow the input, the plan is what it was."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import make_spec, write_csv

from batchor import api
from batchor.pilot import calibrated
from batchor.plan.summary import plan_dict, plan_text

STATE = Path(".batchor") / "state.duckdb"
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
)


def rows(folder: Path, prefix: str, words: range, count: int = 40) -> None:
    """`count` reviews of a number of words cycling through `words` (each text its own request)."""
    sizes = list(words)
    write_csv(
        folder / "data.csv",
        [
            {
                "id": f"{prefix}{i}",
                "text": f"{prefix} review {i} "
                + " ".join(FILLER[(i + k) % len(FILLER)] for k in range(sizes[(i * 7) % len(sizes)])),
            }
            for i in range(count)
        ],
    )


def answers(folder: Path, run_id: str) -> tuple[float, int]:
    """Mean output tokens of a run's accepted answers, and their count."""
    with duckdb.connect(str(folder / STATE), read_only=True) as db:
        mean, n = db.execute(
            "SELECT avg(output_tokens), count(*) FROM attempts WHERE outcome = 'ok' AND run_id = ?", [run_id]
        ).fetchone()
    return float(mean), int(n)


def learned(folder: Path, fake, follow: list[float] | None):
    """Last month's run on short reviews, then the plan of this month's long ones."""
    fake.configure(text_words=[30, 0.3], text_words_follow=follow)
    spec = make_spec(folder, schema=None)
    spec.write_text(spec.read_text().replace("max_tokens: 50", "max_tokens: 2000"))  # long answers, whole
    rows(folder, "old", range(4, 30))
    earlier = api.apply(spec, handle_signals=False)
    rows(folder, "new", range(30, 90))
    return spec, api.plan(spec, save=False), answers(folder, earlier.run_id)


def test_history_of_short_reviews_predicts_long_ones_where_lengths_follow_the_input(workdir, fake):
    spec, plan, (plain, n) = learned(workdir, fake, [1.0, 20])
    step = plan.header.steps[0]
    fit = step.length_fit
    assert fit is not None and fit.answers == n == 40 and fit.r > 0.6
    assert step.output_source == f"history: 40 answers, adjusted for input length (r {fit.r:.2f})"
    assert f"({step.output_source}, " in plan_text(plan)
    assert plan_dict(plan)["steps"][0]["input_length_fit"]["rest_input_mean"] == pytest.approx(fit.rest_input_mean)
    interval = calibrated(plan)
    ran = api.apply_compiled(plan, handle_signals=False)
    actual, _ = answers(workdir, ran.run_id)
    assert abs(plain / actual - 1) > 0.4  # the old answers' mean: far too low for the long reviews
    assert abs(step.expected_output_mean / actual - 1) < 0.12  # the fit at their input: close
    assert interval.low <= ran.cost_usd <= interval.high
    assert plain < step.expected_output_mean


def test_lengths_that_do_not_follow_the_input_keep_today_s_estimate(workdir, fake):
    _, plan, (plain, n) = learned(workdir, fake, None)
    step = plan.header.steps[0]
    assert step.length_fit is None and step.output_source == f"history: {n} answers"
    assert step.expected_output_mean == pytest.approx(plain)
    assert plan_dict(plan)["steps"][0]["input_length_fit"] is None
