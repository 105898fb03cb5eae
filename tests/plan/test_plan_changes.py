"""`plan` tells new rows from changed ones: after an edit, the rows this spec answered before
with a different request are 'changed'; appended rows are 'new'; retries are neither."""

from __future__ import annotations

import yaml

import batchor
from tests.conftest import write_csv


def _spec(folder, rows: int, prompt: str = "Classify: {{ row.text }}", name: str = "changes") -> str:
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": f"review {i}"} for i in range(rows)])
    spec = {"name": name, "input": {"path": "data.csv", "key": "id"},
            "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
            "steps": {"label": {"prompt": prompt, "output": "text"}},
            "output": {"path": "out.csv"}, "limits": {"concurrency": 4, "max_attempts": 1}}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _counts(spec: str) -> dict:
    return batchor.plan(spec, save=False).steps["label"]


def test_an_edit_counts_changed_rows_and_appended_rows_are_new(fake, workdir):
    assert batchor.apply(_spec(workdir, rows=6), max_cost=1).status == "succeeded"
    appended = _counts(_spec(workdir, rows=8))
    assert (appended["to_run"], appended["changed"], appended["cached"]) == (2, 0, 6)

    edited = _spec(workdir, rows=8, prompt="Label this review: {{ row.text }}")
    counts = _counts(edited)
    assert (counts["to_run"], counts["changed"], counts["cached"]) == (8, 6, 0)
    text = batchor.plan(edited, save=False)
    assert "8 to run (2 new, 6 changed)" in str(text)

    batchor.apply(edited, max_cost=1)
    assert _counts(edited)["changed"] == 0  # answered: nothing left to run


def test_a_failed_request_run_again_is_not_a_change(fake, workdir):
    spec = _spec(workdir, rows=3)
    fake.configure(error_500=1.0)  # transient: a later apply runs them again
    assert batchor.apply(spec, max_cost=1).status == "failed"
    fake.configure(error_500=0.0)
    counts = _counts(spec)
    assert (counts["to_run"], counts["changed"]) == (3, 0)


def test_a_request_that_failed_for_good_is_neither_run_nor_a_change(fake, workdir):
    spec = _spec(workdir, rows=3)
    fake.configure(error_400=1.0)  # deterministic: not sent again unless asked
    assert batchor.apply(spec, max_cost=1).status == "failed"
    counts = _counts(spec)
    assert (counts["to_run"], counts["changed"], counts["failed_earlier"]) == (0, 0, 3)
    again = batchor.plan(spec, save=False, retry_failed=True).steps["label"]
    assert (again["to_run"], again["changed"], again["failed_earlier"]) == (3, 0, 0)


def test_another_spec_on_the_same_state_is_not_compared(fake, workdir):
    batchor.apply(_spec(workdir, rows=4), max_cost=1)
    other = _spec(workdir, rows=4, prompt="Other: {{ row.text }}", name="another")
    counts = _counts(other)
    assert (counts["to_run"], counts["changed"]) == (4, 0)
