"""Projected rows of a step that uses an earlier step's answers: a `when:` that reads only the row
is decided at plan time (its skipped rows are counted exactly, the projection is not scaled by a
sampled selectivity); one that reads an earlier answer stays projected."""

from __future__ import annotations

import yaml

import batchor
from tests.conftest import write_csv

ROWS = 30


def _spec(folder, when: str) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(ROWS)])
    spec = {"name": "tickets", "input": {"path": "data.csv", "key": "id"},
            "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 100}},
            "steps": {"triage": {"prompt": "Classify: {{ row.text }}", "output": "text"},
                      "reply": {"prompt": "Reply to {{ row.text }} ({{ triage }})", "output": "text", "when": when}},
            "output": {"path": "out.csv"}}
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
