"""`plan` tells new rows from changed ones: after an edit, the rows this spec answered before
with a different request are 'changed'; appended rows are 'new'; retries are neither."""

from __future__ import annotations

from pathlib import Path

import yaml

import batchor
from tests.conftest import write_csv


def _spec(folder, rows: int, prompt: str = "Classify: {{ row.text }}", name: str = "changes") -> str:
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": f"review {i}"} for i in range(rows)])
    spec = {
        "name": name,
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
        "steps": {"label": {"prompt": prompt, "output": "text"}},
        "output": {"path": "out.csv"},
        "limits": {"concurrency": 4, "max_attempts": 1},
    }
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
    assert "| label | openai:gpt-4.1-mini | 8 | 6 (template 6) | 0 |" in text._repr_markdown_()

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
        "schema": {
            "steps__label__output": {
                "schema": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": ["x"],
                    "additionalProperties": False,
                }
            }
        },
        "template+model": {"steps__label__prompt": "Label: {{ row.text }}", "model__name": "gpt-4.1-nano"},
    }
    for cause, changes in cases.items():
        counts = _counts(_edited(workdir, **changes))
        assert (counts["changed"], counts["changed_by"]) == (4, {cause: 4}), cause
    spec = _spec(workdir, rows=4)  # the spec as it was answered; one row's text edited
    write_csv(
        workdir / "data.csv", [{"id": f"r{i}", "text": f"review {i}" + (" edited" if i == 1 else "")} for i in range(4)]
    )
    counts = _counts(spec)
    assert (counts["to_run"], counts["changed_by"]) == (1, {"row values": 1})
    assert "1 to run (0 new, 1 changed: row values 1)" in str(batchor.plan(spec, save=False))


def _pipeline(folder, label: dict | None = None, reply: dict | None = None) -> str:
    """A 2-step spec: `reply` is rendered from `label`'s answer (a dependent step)."""
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": f"review {i}"} for i in range(4)])
    steps = {
        "label": {"prompt": "Classify: {{ row.text }}", "output": "text", **(label or {})},
        "reply": {"prompt": "Reply to {{ row.text }} given {{ label }}", "output": "text", **(reply or {})},
    }
    spec = {
        "name": "pipeline",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
        "steps": steps,
        "output": {"path": "out.csv"},
        "limits": {"concurrency": 4, "max_attempts": 1},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _step_counts(spec: str) -> dict:
    return batchor.plan(spec, save=False).steps


def test_a_dependent_step_changed_is_split_by_cause(fake, workdir):
    assert batchor.apply(_pipeline(workdir), max_cost=1).status == "succeeded"
    unchanged = _step_counts(_pipeline(workdir))
    assert [(unchanged[s]["to_run"], unchanged[s]["changed"]) for s in ("label", "reply")] == [(0, 0), (0, 0)]
    cases = {
        "model": {"model": {"name": "gpt-4.1-nano"}},
        "template": {"prompt": "Answer {{ row.text }}: {{ label }}"},
        "params": {"model": {"params": {"max_tokens": 25}}},
        "schema": {
            "output": {
                "schema": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": ["x"],
                    "additionalProperties": False,
                }
            }
        },
    }
    for cause, change in cases.items():
        plan = batchor.plan(_pipeline(workdir, reply=change), save=False)
        label, reply = plan.steps["label"], plan.steps["reply"]
        assert (label["to_run"], label["changed"]) == (0, 0), cause
        assert (reply["to_run"], reply["changed"], reply["changed_by"]) == (4, 4, {cause: 4}), cause
        assert f"4 to run (0 new, 4 changed: {cause} 4)" in str(plan), cause


def test_a_dependent_step_below_a_changed_step_is_projected(fake, workdir):
    assert batchor.apply(_pipeline(workdir), max_cost=1).status == "succeeded"
    edited = {"prompt": "Label: {{ row.text }}"}
    reply = _step_counts(_pipeline(workdir, label=edited))["reply"]
    assert (reply["projected"], reply["changed"], reply["changed_by"]) == (4, 4, {"upstream (projected)": 4})
    plan = batchor.plan(_pipeline(workdir, label=edited, reply={"model": {"name": "gpt-4.1-nano"}}), save=False)
    assert plan.steps["reply"]["changed_by"] == {"model (projected)": 4}
    assert "4 changed: model 4 (projected)" in str(plan)
    assert "| reply | openai:gpt-4.1-nano | 4 | 4 (model 4 (projected)) |" in plan._repr_markdown_()


def test_a_row_too_long_for_the_context_window_is_not_counted_changed(fake, workdir):
    """A row over the window fails without a call: it never runs, so it is not among the changed
    rows to run either ('1 to run (-1 new, 2 changed)' was printed for a 20 MB cell)."""
    path = Path(_spec(workdir, rows=3))
    write_csv(
        workdir / "data.csv",
        [{"id": "r0", "text": "long " * 400}, {"id": "r1", "text": "review 1"}, {"id": "r2", "text": "review 2"}],
    )
    spec = yaml.safe_load(path.read_text())
    spec["model"]["context_window"] = 200
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    batchor.apply(str(path), max_cost=1)
    spec["steps"]["label"]["prompt"] = "Label this review: {{ row.text }}"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    counts = _counts(str(path))
    assert (counts["to_run"], counts["too_long"], counts["changed"]) == (2, 1, 2)
    assert "2 to run (0 new, 2 changed: template 2)" in str(batchor.plan(str(path), save=False))
