"""The column-wise render path must produce exactly what Jinja row by row produces."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_spec, write_csv

from batchor import api
from batchor.fingerprint import canonical_json, request_key_from_json
from batchor.plan import render as render_module
from batchor.plan.column_render import column_template, fast_step
from batchor.plan.request import request_keys
from batchor.plan.tokens import get_counter
from batchor.spec.templates import compile_step, make_environment

NASTY = [
    "plain",
    'quote " and \\ backslash',
    "new\nline\ttab\r\x00\x01\x08\x0c\x1f\x7f",
    "é ü 日本 🙂 \u2028\u2029",
    "",
    None,
    "{{ row.a }} stays literal",
    "trailing space ",
    "  lead",
]
TEMPLATES = [
    ("Fixed system.", "Review: {{ row.a }}"),
    ("System for {{ row.b }}.", 'A="{{ row.a }}"\nB={{ row["b"] }}\n\n'),
    (None, "{# comment #}{{ row.a }}{{ row.b }}\n  {{- row.a -}}  \nend\n"),
    (None, "{{ 'const' }} and {{ row.a }}"),
]


def _batch() -> pa.RecordBatch:
    n = len(NASTY)
    return pa.RecordBatch.from_pydict({"_row_key": [str(i) for i in range(n)], "a": NASTY, "b": list(reversed(NASTY))})


@pytest.mark.parametrize(("system", "prompt"), TEMPLATES)
def test_bodies_keys_and_tokens_match_jinja(system, prompt):
    batch = _batch()
    fast = fast_step(system, prompt, None, batch.schema)
    assert fast is not None
    tpl = compile_step(make_environment(), "s", system, prompt, None, set())
    rows = batch.select(["a", "b"]).to_pylist()
    messages = [tpl.render_messages({"row": row}) for row in rows]
    expected = [canonical_json(m) for m in messages]
    bodies = fast.bodies(batch).to_pylist()
    assert bodies == expected
    assert request_keys("prefix", bodies) == [request_key_from_json("prefix", b) for b in expected]
    contents = [(role, c if isinstance(c, str) else c.to_pylist()) for role, c in fast.render(batch)]
    counter = get_counter("openai", "gpt-4.1-mini")
    assert counter.count_chat_columns(contents, batch.num_rows) == counter.count_messages_batch(messages)


@pytest.mark.parametrize(
    "source",
    [
        "{{ row.a | upper }}",
        "{% if row.a %}x{% endif %}",
        "{{ row.items }}",
        "{{ row[name] }}",
        "{% for c in row %}{{ c }}{% endfor %}",
        "{{ other.a }}",
    ],
)
def test_templates_needing_jinja_are_not_vectorized(source):
    assert column_template(source) is None


def test_non_text_columns_and_when_take_the_jinja_path():
    batch = pa.RecordBatch.from_pydict({"_row_key": ["1"], "n": [1.5]})
    assert fast_step(None, "{{ row.n }}", None, batch.schema) is None
    text = pa.RecordBatch.from_pydict({"_row_key": ["1"], "a": ["x"]})
    assert fast_step(None, "{{ row.a }}", "row.a", text.schema) is None


def test_plan_data_is_the_same_on_both_paths(workdir, monkeypatch):
    spec = make_spec(
        workdir,
        steps={"classify": {"system": "Sys {{ row.id }}", "prompt": 'Say "{{ row.text }}"\n'}},
    )
    rows = [{"id": f"r{i}", "text": NASTY[i % len(NASTY)] or ""} for i in range(30)]
    write_csv(workdir / "data.csv", rows + [{"id": "dup", "text": "plain"}])
    used = []
    real = render_module.fast_step
    monkeypatch.setattr(render_module, "fast_step", lambda *args: used.append(real(*args)) or used[-1])
    fast = api.plan(spec, save=False)
    assert used and used[0] is not None, "the column-wise path was not taken"
    monkeypatch.setattr(render_module, "fast_step", lambda *args: None)
    slow = api.plan(spec, save=False)
    assert pq.read_table(fast._data_path).equals(pq.read_table(slow._data_path))
    assert fast.header.totals == slow.header.totals
    assert fast.plan_id == slow.plan_id


class _Store:
    def __init__(self, cached: set[str]) -> None:
        self.cached = cached

    def cached_keys(self, keys: pa.Array) -> set[str]:
        return {k for k in keys.to_pylist() if k in self.cached}

    def failed_key_array(self, keys: pa.Array, codes) -> pa.Array:
        return pa.array([], pa.string())  # nothing failed


class _Step:
    def __init__(self, window: int | None) -> None:
        self.context_window, self.max_tokens = window, 10


def _reference(keys, tokens, cached, step):
    """The row-by-row tally the planner used before counting column-wise."""
    counts = {"rows": 0, "skipped": 0, "cached": 0, "to_run": 0, "input_tokens": 0, "too_long": 0}
    seen: set[str] = set()
    for key, n in zip(keys, tokens):
        counts["rows"] += 1
        counts["skipped"] += key is None
        if key is None or key in cached or key in seen:
            counts["cached"] += key is not None and key in cached
            continue
        seen.add(key)
        if step.context_window is not None and n + step.max_tokens > step.context_window:
            counts["too_long"] += 1
            continue
        counts["to_run"] += 1
        counts["input_tokens"] += n
    return counts


@pytest.mark.parametrize("window", [None, 60])
def test_row_tally_counts_like_the_row_by_row_loop(window):
    keys = ["a1", None, "b2", "a1", "c3", "ff", "c3", None, "0x", "b2"]
    tokens = [5, None, 70, 5, 20, 51, 20, None, 9, 70]
    step, store = _Step(window), _Store({"b2", "0x"})
    tally = render_module.RowTally()
    for start in (0, 4, 7):  # three batches
        end = {0: 4, 4: 7, 7: 10}[start]
        tally.add(pa.array(keys[start:end], pa.string()), pa.array(tokens[start:end], pa.int32()))
    tally.finish(step, store)
    got = {name: getattr(tally, name) for name in ("rows", "skipped", "cached", "to_run", "input_tokens", "too_long")}
    assert got == _reference(keys, tokens, store.cached, step)
