"""One request identity on every path: the plan (root steps column-wise and with Jinja, dependent
steps), apply wave by wave, and apply pipelined row by row give each row the same request key and
send the same bodies, for `when:` steps and fan-out element rows too (real openai SDK against the
fake provider, real DuckDB)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
import yaml

import batchor
from batchor import api
from batchor.plan.column_render import fast_step
from batchor.plan.model import req_column
from batchor.plan.request import StepRequests
from batchor.plan.steps import Overrides, resolve_steps
from batchor.spec.load import load_spec
from batchor.state import open_state
from tests.conftest import write_csv

ASPECTS = {
    "type": "object",
    "properties": {"aspects": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["aspects"],
    "additionalProperties": False,
}
TEXTS = ["plain {i}", 'quote " and \\ backslash {i}', "new\nline\ttab {i}", "é 日本 🙂 {i}", "{{{{ row.x }}}} {i}"]
ROOTS = ("extract", "tone")
LLM_STEPS = ("extract", "tone", "summary", "judge")


def _spec(folder, rows: int = 15) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": TEXTS[i % len(TEXTS)].format(i=i)} for i in range(rows)])
    steps = {
        "extract": {
            "system": "Find aspects.",
            "prompt": "Aspects of {{ row.text }}",  # column-wise
            "output": {"schema": ASPECTS},
        },
        "tone": {"prompt": "Tone of {{ row | tojson }}", "when": "row.id != 't3'"},  # Jinja, when:
        "summary": {
            "prompt": "Sum up {{ extract.aspects | join(', ') }} of {{ row.text }}",  # dependent
            "when": "extract.aspects | length != 2",
        },
        "aspect": {"sql": "SELECT _row_key, unnest(extract.aspects) AS name FROM rows"},  # fan-out
        "judge": {
            "prompt": "Judge {{ aspect.name }} in {{ row.text }}; tone {{ tone }}",  # elements
            "when": "aspect.name != ''",
        },
    }
    spec = {
        "name": "identity",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": steps,
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 4},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(path)


def _row_map(state: str) -> dict[tuple[str, str], str | None]:
    """(step, row key) -> request key, as the apply recorded it."""
    store = open_state(state)
    try:
        rows = store.execute("SELECT step, row_key, request_key FROM job_requests")
    finally:
        store.close()
    return {(step, row): key for step, row, key in rows if step in LLM_STEPS}


def _apply(fake, spec: str, state: str, **options) -> tuple[dict, Counter]:
    fake.reset()
    result = batchor.apply(spec, state=state, max_cost=1, **options)
    assert result.status == "succeeded", result
    return _row_map(state), Counter(fake.stats()["by_prompt"])


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_plan_waves_and_pipeline_key_and_send_every_row_alike(fake, workdir):
    spec = _spec(workdir)
    fresh = api.plan(spec, state=str(workdir / "fresh.duckdb"))
    waves, sent_waves = _apply(fake, spec, str(workdir / "waves.duckdb"), limits={"pipeline": False})
    piped, sent_piped = _apply(fake, spec, str(workdir / "piped.duckdb"))

    assert waves == piped  # every row of every step, element rows included, has one key
    assert sent_waves == sent_piped  # and the same prompts went over the wire, as often
    elements = [row for step, row in waves if step == "judge"]
    assert elements and all("#" in row for row in elements)
    assert any(key is None for (step, _), key in waves.items() if step == "summary")  # `when:` skipped
    assert waves[("tone", "t3")] is None

    data = next(fresh.iter_batches(["_row_key", *(req_column(s, "key") for s in ROOTS)], batch_size=1000))
    for i, root in enumerate(ROOTS, 1):  # the plan's own keys are the ones applied
        planned = dict(zip(data.column(0).to_pylist(), data.column(i).to_pylist()))
        assert planned == {row: key for (step, row), key in waves.items() if step == root}

    again = api.plan(spec, state=str(workdir / "waves.duckdb"))  # dependents keyed at plan time
    for step in LLM_STEPS:
        keys = [key for (s, _), key in waves.items() if s == step]
        counts = again.steps[step]
        assert (counts["to_run"], counts["projected"]) == (0, 0), step
        assert counts["cached"] == sum(k is not None for k in keys), step


def test_column_wise_bodies_and_keys_are_the_rendered_ones(workdir):
    spec = _spec(workdir)
    loaded = load_spec(spec)
    steps, templates = resolve_steps(loaded, Overrides())
    step = next(s for s in steps if s.name == "extract")
    texts = [t.format(i=i) for i, t in enumerate(TEXTS)] + [""]
    batch = pa.RecordBatch.from_pydict({"_row_key": [f"r{i}" for i in range(len(texts))], "text": texts})
    fast = fast_step(step.system, step.prompt, step.when, batch.schema)
    assert fast is not None
    requests = StepRequests(step, templates["extract"])
    bodies = fast.bodies(batch).to_pylist()
    rendered = [requests.render(f"r{i}", {"row": {"text": t}}) for i, t in enumerate(texts)]
    assert bodies == [r.body for r in rendered]
    assert requests.keys(bodies) == [r.key for r in rendered]
