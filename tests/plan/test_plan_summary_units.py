"""The plan's counts name their unit: requests to run, rows cached and skipped. Rows that share a
request (the same text) made a bare `59 cached` next to `227 to run` read as requests."""

from __future__ import annotations

import batchor
from batchor.plan.summary import plan_markdown, plan_text
from tests.conftest import make_spec, write_csv


def _rows(texts: list[str]) -> list[dict[str, str]]:
    return [{"id": f"r{i}", "text": text} for i, text in enumerate(texts)]


def test_cached_rows_and_requests_to_run_are_counted_in_their_own_units(fake, workdir):
    spec = make_spec(workdir, rows=6)
    write_csv(workdir / "data.csv", _rows(["a", "a", "b", "b", "c", "c"]))
    assert batchor.apply(spec, handle_signals=False).status == "succeeded"  # 3 requests for 6 rows
    write_csv(workdir / "data.csv", _rows(["a", "a", "b", "b", "c", "c", "d", "d", "e", "e", "f", "f"]))
    plan = batchor.plan(spec, save=False)
    step = plan.header.steps[0].counts
    assert (step.to_run, step.cached) == (3, 6)  # requests, rows
    text = plan_text(plan)
    assert "requests    3 to run (3 rows share a request with another row), 6 rows cached, 0 skipped" in text
    assert "3 to run, 6 rows cached, 0 skipped" in text
    assert "**3 requests to run**, 6 rows cached" in plan_markdown(plan)
