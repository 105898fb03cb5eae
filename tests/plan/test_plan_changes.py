"""`plan` tells new rows from changed ones: after an edit, the rows this spec answered before
with a different request are 'changed'; appended rows are 'new'; retries are neither."""

from __future__ import annotations

from pathlib import Path

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
    assert "8 to run (2 new, 6 changed: template 6)" in str(text)

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


def _edited(folder, rows: int = 4, **changes) -> str:
    spec = _spec(folder, rows=rows)
    data = yaml.safe_load(Path(spec).read_text(encoding="utf-8"))
    for path, value in changes.items():
        node = data
        *parents, last = path.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    Path(spec).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def test_changed_rows_are_split_by_cause(fake, workdir):
    assert batchor.apply(_spec(workdir, rows=4), max_cost=1).status == "succeeded"
    cases = {
        "template": {"steps__label__prompt": "Label: {{ row.text }}"},
        "model": {"model__name": "gpt-4.1-nano"},
        "params": {"model__params": {"max_tokens": 21}},
        "schema": {"steps__label__output": {"schema": {"type": "object", "properties": {"x": {"type": "string"}},
                                                       "required": ["x"], "additionalProperties": False}}},
        "template+model": {"steps__label__prompt": "Label: {{ row.text }}", "model__name": "gpt-4.1-nano"},
    }
    for cause, changes in cases.items():
        counts = _counts(_edited(workdir, **changes))
        assert (counts["changed"], counts["changed_by"]) == (4, {cause: 4}), cause
    spec = _spec(workdir, rows=4)  # the spec as it was answered; one row's text edited
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": f"review {i}" + (" edited" if i == 1 else "")}
                                     for i in range(4)])
    counts = _counts(spec)
    assert (counts["to_run"], counts["changed_by"]) == (1, {"row values": 1})
    assert "1 to run (0 new, 1 changed: row values 1)" in str(batchor.plan(spec, save=False))
