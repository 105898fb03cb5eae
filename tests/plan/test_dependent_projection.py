"""Projected rows of a step that uses an earlier step's answers: a `when:` that reads only the row
is decided at plan time (its skipped rows are counted exactly, the projection is not scaled by a
sampled selectivity); one that reads an earlier answer stays projected."""

from __future__ import annotations

import pytest
import yaml

import batchor
from batchor.plan.model import output_per_request
from tests.conftest import write_csv

ROWS = 30


def _spec(folder, when: str) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(ROWS)])
    spec = {
        "name": "tickets",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 100}},
        "steps": {
            "triage": {"prompt": "Classify: {{ row.text }}", "output": "text"},
            "reply": {"prompt": "Reply to {{ row.text }} ({{ triage }})", "output": "text", "when": when},
        },
        "output": {"path": "out.csv"},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_a_when_on_the_row_alone_is_decided_before_the_earlier_step_answers(workdir):
    plan = batchor.plan(_spec(workdir, "row.id[-1] in '147'"), save=False)
    reply = plan.header.steps[1]
    runs = sum(1 for i in range(ROWS) if str(i)[-1] in "147")
    assert (reply.counts.projected, reply.counts.skipped, reply.counts.to_run) == (runs, ROWS - runs, runs)
    assert reply.counts.when_decided
    per_row = plan.header.steps[1].counts.output_tokens_upper / runs
    assert per_row == reply.max_tokens  # the bound counts only the rows that will run
    assert reply.counts.output_tokens_expected == runs * reply.expected_output_tokens  # no sampled selectivity


def test_a_when_on_an_earlier_answer_stays_projected(workdir):
    plan = batchor.plan(_spec(workdir, "'urgent' in triage"), save=False)
    reply = plan.header.steps[1]
    assert (reply.counts.projected, reply.counts.skipped, reply.counts.when_decided) == (ROWS, 0, False)


def test_projected_input_is_rendered_from_many_rows_not_the_first(workdir):
    _spec(workdir, "true")
    texts = ["short"] + [("a long ticket about a broken order " * (1 + i % 9)).strip() for i in range(1, ROWS)]
    write_csv(workdir / "data.csv", [{"id": f"t{i}", "text": text} for i, text in enumerate(texts)])
    reply = batchor.plan(workdir / "spec.yaml", save=False).header.steps[1]
    expected = reply.counts.output_tokens_expected / output_per_request(reply)  # requests (repeats sent once)
    per_row = reply.counts.input_tokens / expected  # input tokens count the expected requests, as the cost
    first = batchor.plan(workdir / "spec.yaml", save=False, limit=1).header.steps[1]
    assert per_row > first.counts.input_tokens + 20  # the first (short) row is not all rows
    assert reply.counts.cost_upper > reply.counts.cost_expected


def test_rows_that_will_send_the_same_request_are_projected_once(workdir):
    """Duplicate texts send one `triage` request, so one `reply` request (it reads the same columns
    and the same upstream answer): the expected cost counts requests, the upper bound every row."""
    path = _spec(workdir, "true")
    distinct = batchor.plan(path, save=False).header.steps[1].counts
    write_csv(workdir / "data.csv", [{"id": f"t{i}", "text": f"ticket {i % 10 + 10}"} for i in range(ROWS)])
    repeated = batchor.plan(path, save=False).header.steps[1].counts
    assert repeated.projected == distinct.projected == ROWS and repeated.cost_upper == distinct.cost_upper
    assert repeated.cost_expected == pytest.approx(distinct.cost_expected / 3)  # 10 distinct texts of 30 rows
    assert batchor.plan(path, save=False).header.steps[0].counts.to_run == 10


def test_rows_alike_in_the_columns_read_but_not_in_the_id_the_prompt_reads_stay_apart(workdir):
    path = _spec(workdir, "true")
    write_csv(workdir / "data.csv", [{"id": f"t{i}", "text": f"ticket {i % 10 + 10}"} for i in range(ROWS)])
    spec = yaml.safe_load((workdir / "spec.yaml").read_text())
    spec["steps"]["reply"]["prompt"] = "Reply to {{ row.id }}: {{ row.text }} ({{ triage }})"
    (workdir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    reply = batchor.plan(path, save=False).header.steps[1]
    per_request = batchor.plan(path, save=False, limit=1).header.steps[1].counts.cost_expected
    assert reply.counts.cost_expected > 20 * per_request  # 30 requests, not 10
