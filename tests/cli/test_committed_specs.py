"""Every committed spec validates, plans and applies end to end (offline with --mock), and the
flagship example also runs with the real openai SDK against the fake server."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_helpers import ROOT

from batchor import api

SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def output_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def mtime(path: Path) -> int | None:
    return path.stat().st_mtime_ns if path.exists() else None


def test_cli_validates_every_committed_spec(workdir, batchor_cli):
    result = batchor_cli(workdir, "validate", *SPECS, "--json")
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    assert [r["ok"] for r in reports] == [True] * len(SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_committed_spec_plans_and_applies_with_mock(workdir, fake, spec):
    """Each spec's first 40 rows (every step, check and output of the spec; the quickstart test
    applies all 300 rows of reviews.yaml and test_reviews_spec_applies_with_the_openai_sdk too)."""
    state = str(workdir / "state.duckdb")
    plan = api.plan(spec, mock=True, state=state, limit=40)
    assert plan.header.totals.rows > 0 and plan.header.totals.to_run > 0
    default_output = Path(plan.header.output.path)
    before = mtime(default_output)
    output = workdir / f"out{default_output.suffix}"
    outcome = api.apply(plan, output=output, state=state, handle_signals=False)
    assert outcome.status == "succeeded"
    rows = output_rows(output)
    if any(s.fan_out for s in plan.header.steps):  # one row per element; every input row still there
        assert len(rows) >= plan.header.totals.rows
        assert len({r["_row_key"].split("#")[0] for r in rows}) == plan.header.totals.rows
    else:
        assert len(rows) == plan.header.totals.rows
    assert {r["_status"] for r in rows} <= {"succeeded", "skipped"}
    assert any(r["_status"] == "succeeded" for r in rows)
    assert fake.stats()["requests"] == 0
    assert mtime(default_output) == before  # the repository's out/ was left alone


def test_reviews_spec_applies_with_the_openai_sdk(workdir, fake):
    spec = ROOT / "specs" / "reviews.yaml"
    state = str(workdir / "state.duckdb")
    output = workdir / "reviews.csv"
    # the spec's rpm (500) paces a real account; the fake has no limit, so lift it
    outcome = api.apply(spec, state=state, output=output, limits={"rpm": None}, handle_signals=False)
    assert outcome.status == "succeeded"
    rows = output_rows(output)
    with (ROOT / "examples" / "data" / "reviews.csv").open(newline="", encoding="utf-8") as handle:
        source = list(csv.DictReader(handle))
    assert [r["review_id"] for r in rows] == [r["review_id"] for r in source]
    assert all(r["_status"] == "succeeded" for r in rows)
    assert all(r["classify.sentiment"] in ("positive", "negative", "mixed") for r in rows)
    assert all(1 <= int(r["classify.rating_guess"]) <= 5 for r in rows)
    assert all(isinstance(json.loads(r["classify.topics"]), list) for r in rows)
    stats = fake.stats()
    unique_prompts = len({(r["product"], r["text"]) for r in source})
    assert stats["by_endpoint"] == {"openai.chat_completions": unique_prompts}
    assert set(stats["by_prompt"].values()) == {1}
