"""Embedding steps end to end: the real openai and google-genai SDKs over HTTP against the fake,
which checks each request's shape as the APIs do and counts texts per call; the real DuckDB
state and output files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from batchor import api
from batchor.errors import SpecError
from batchor.providers.embeddings import mock_vector
from tests.conftest import write_csv
from tests.engine.batch_helpers import FAST
from tests.fakes.answers import prompt_key
from tests.fakes.lengths import count_tokens
from tests.providers.test_providers_http import query

PRICE = {"text-embedding-3-small": 0.02, "gemini-embedding-001": 0.15}  # USD per million input tokens


def texts(n: int, prefix: str = "review") -> list[dict[str, str]]:
    return [{"id": f"r{i}", "text": f"{prefix} number {i} says the product is fine"} for i in range(n)]


def embed_job(
    folder: Path,
    rows: list[dict[str, str]],
    *,
    provider: str = "openai",
    model: str = "text-embedding-3-small",
    step: dict[str, Any] | None = None,
    block: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    steps: dict[str, Any] | None = None,
    output: str = "out/results.parquet",
) -> Path:
    write_csv(folder / "rows.csv", rows)
    spec = {
        "version": 1,
        "name": "embed",
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini"},
        "steps": {
            "vec": {
                "embed": "{{ row.text }}",
                "dimensions": 8,
                "model": {"provider": provider, "name": model, **(block or {})},
                **(step or {}),
            },
            **(steps or {}),
        },
        "output": {"path": output},
        "limits": {"concurrency": 4, "max_attempts": 3, "request_timeout_s": 10, **(limits or {})},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def apply(folder: Path, spec: Path, **kwargs: Any):
    return api.apply(spec, state=str(folder / "state.duckdb"), handle_signals=False, progress=False, **kwargs)


def attempts(folder: Path) -> list[tuple]:
    return query(
        folder,
        "SELECT request_key, attempt, outcome, input_tokens, output_tokens, cost_usd, estimated "
        "FROM attempts ORDER BY request_key, attempt",
    )


@pytest.mark.slow  # 2,100 rows: ~5 s on a loaded machine (group_size below covers the default tier)
def test_openai_sends_many_texts_per_call_within_its_limit(fake, workdir):
    spec = embed_job(workdir, texts(2100))
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded" and outcome.succeeded == 2100
    stats = fake.stats()
    assert sorted(stats["embed_calls"]) == [52, 2048]  # ceil(2100 / 2048) calls, at most 2048 texts each
    assert stats["by_endpoint"] == {"openai.embeddings": 2}
    assert len(stats["embedded"]) == 2100 and set(stats["embedded"].values()) == {1}


def test_group_size_lowers_the_texts_per_call(fake, workdir):
    spec = embed_job(workdir, texts(250), step={"group_size": 100})
    assert apply(workdir, spec).succeeded == 250
    assert sorted(fake.stats()["embed_calls"]) == [50, 100, 100]


def test_same_text_is_paid_once_and_a_second_apply_pays_nothing(fake, workdir):
    rows = texts(30) + [{"id": f"dup{i}", "text": "review number 3 says the product is fine"} for i in range(5)]
    spec = embed_job(workdir, rows)
    first = apply(workdir, spec)
    assert first.succeeded == 30 and fake.stats()["embedded"][prompt_key(rows[3]["text"])] == 1
    assert sum(fake.stats()["embed_calls"]) == 30  # 35 rows, 30 distinct texts
    assert pq.read_table(workdir / "out" / "results.parquet").column("vec").null_count == 0
    fake.reset()
    again = apply(workdir, spec)
    assert again.status == "succeeded" and again.cost_usd == 0 and fake.stats()["requests"] == 0


def test_each_text_carries_its_share_of_the_billed_call(fake, workdir):
    rows = [{"id": "a", "text": "short"}, {"id": "b", "text": "a much longer text " * 20}]
    spec = embed_job(workdir, rows)
    outcome = apply(workdir, spec)
    billed = sum(count_tokens(r["text"], "chars/4") for r in rows)  # the fake's usage
    recorded = attempts(workdir)
    assert [r[2] for r in recorded] == ["ok", "ok"]
    assert sum(r[3] for r in recorded) == billed and all(r[4] == 0 for r in recorded)
    assert sum(r[5] for r in recorded) == pytest.approx(billed * PRICE["text-embedding-3-small"] / 1e6)
    long_share = max(r[3] for r in recorded)
    assert long_share > 10 * min(r[3] for r in recorded)  # split by the texts' token counts
    assert outcome.cost_usd == pytest.approx(sum(r[5] for r in recorded))


@pytest.mark.parametrize("fault", ["429", "500"])
def test_a_refused_call_is_sent_again_and_every_row_answered(fake, workdir, fault):
    fake.configure(fault_plan={"openai.embeddings": [fault, "ok"]}, retry_after_s=0.01)
    spec = embed_job(workdir, texts(10))
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded" and outcome.succeeded == 10
    stats = fake.stats()
    assert stats["endpoint_calls"]["openai.embeddings"] == 2 and stats["embed_calls"] == [10]
    by_row: dict[str, list[str]] = {}
    for key, _, outcome, *_ in attempts(workdir):
        by_row.setdefault(key, []).append(outcome)
    refused = "rate_limited" if fault == "429" else "provider_unavailable"
    assert len(by_row) == 10 and all(sorted(o) == sorted([refused, "ok"]) for o in by_row.values())


def test_a_text_the_api_refuses_fails_alone(fake, workdir):
    rows = texts(16)
    rows[5]["text"] = "POISON text the provider refuses"
    fake.configure(fail_matching={"POISON": 400})
    spec = embed_job(workdir, rows)
    outcome = apply(workdir, spec)
    assert outcome.status == "partial" and (outcome.succeeded, outcome.failed) == (15, 1)
    failed = query(workdir, "SELECT error_code FROM results WHERE status = 'failed'")
    assert failed == [("invalid_request",)]
    assert sum(fake.stats()["embed_calls"]) == 15  # every other text answered once: none paid twice
    assert len(fake.stats()["embed_calls"]) <= 2 * math.ceil(math.log2(16))


def test_a_refusal_of_the_request_itself_fails_every_text_after_six_calls(fake, workdir):
    fake.configure(fail_matching={"review": 400})  # every text: the request, not one text, is refused
    outcome = apply(workdir, embed_job(workdir, texts(16)))
    assert outcome.status == "failed" and outcome.failed == 16
    assert query(workdir, "SELECT DISTINCT error_code FROM results") == [("invalid_request",)]
    assert fake.stats()["endpoint_calls"]["openai.embeddings"] == 6  # the call, two halves, three texts (not 31)


def test_two_refused_texts_in_different_halves_still_fail_alone(fake, workdir):
    rows = texts(16)
    for i in (0, 12):  # the first is also the first text tried alone
        rows[i]["text"] = f"POISON text {i} the provider refuses"
    fake.configure(fail_matching={"POISON": 400})
    outcome = apply(workdir, embed_job(workdir, rows))
    assert (outcome.succeeded, outcome.failed) == (14, 2)
    table = pq.read_table(workdir / "out/results.parquet").to_pylist()
    assert sorted(r["id"] for r in table if r["vec"] is None) == ["r0", "r12"]
    assert sum(fake.stats()["embed_calls"]) == 14  # each good text answered once


def test_empty_and_too_long_texts_fail_before_any_call(fake, workdir):
    rows = texts(3) + [{"id": "empty", "text": ""}, {"id": "long", "text": "word " * 9000}]
    spec = embed_job(workdir, rows)
    outcome = apply(workdir, spec)
    assert (outcome.succeeded, outcome.failed) == (3, 2)
    assert fake.stats()["embed_calls"] == [3]
    codes = sorted(r[0] for r in query(workdir, "SELECT error_code FROM results WHERE status = 'failed'"))
    assert codes == ["context_length", "invalid_request"]


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "text-embedding-3-small"), ("gemini", "gemini-embedding-001")]
)
def test_batch_embeddings_refuse_what_realtime_refuses_before_any_upload(fake, workdir, provider, model):
    rows = texts(3) + [{"id": "empty", "text": ""}, {"id": "long", "text": "word " * 9000}]
    spec = embed_job(workdir, rows, provider=provider, model=model, limits=FAST)
    outcome = apply(workdir, spec)
    assert (outcome.succeeded, outcome.failed) == (3, 2)
    assert sorted(fake.stats()["batch_rows_by_id"].values()) == [1, 1, 1]  # only the good texts went in a batch
    failed = query(workdir, "SELECT error_code, error, attempts FROM results WHERE status = 'failed' ORDER BY 1")
    assert [(code, attempts) for code, _, attempts in failed] == [("context_length", 0), ("invalid_request", 0)]
    assert all("(not sent)" in error for _, error, _ in failed)


def test_gemini_groups_at_most_100_texts_per_call(fake, workdir):
    spec = embed_job(workdir, texts(250), provider="gemini", model="gemini-embedding-001")
    outcome = apply(workdir, spec)
    assert outcome.succeeded == 250
    assert sorted(fake.stats()["embed_calls"]) == [50, 100, 100]
    assert fake.stats()["by_endpoint"] == {"gemini.batch_embed_contents": 3}
    recorded = attempts(workdir)
    assert all(r[6] for r in recorded)  # Gemini sends no usage: the cost is the plan's count, an estimate
    plan_tokens = api.plan(spec, state=str(workdir / "x.duckdb"), save=False).header.steps[0].counts.input_tokens
    assert sum(r[5] for r in recorded) == pytest.approx(plan_tokens * PRICE["gemini-embedding-001"] / 1e6)


def test_an_openai_compatible_server_embeds_for_free(fake, workdir):
    spec = embed_job(
        workdir,
        texts(5),
        provider="vllm",
        model="BAAI/bge-small",
        block={"base_url": fake.openai_base_url},
        step={"dimensions": None},
    )
    outcome = apply(workdir, spec)
    assert outcome.succeeded == 5 and outcome.cost_usd == 0
    table = pq.read_table(workdir / "out" / "results.parquet")
    assert len(table.column("vec")[0].as_py()) == 32  # the server's size, learnt from its answers


def test_openai_batch_api_on_v1_embeddings(fake, workdir):
    spec = embed_job(workdir, texts(12), limits=FAST)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded" and outcome.succeeded == 12
    stats = fake.stats()
    assert stats["batches_created"] == 1 and stats["by_endpoint"] == {} and stats["batch_rows"] == 12
    recorded = attempts(workdir)
    tokens = sum(r[3] for r in recorded)
    assert sum(r[5] for r in recorded) == pytest.approx(tokens * PRICE["text-embedding-3-small"] / 2 / 1e6)


@pytest.mark.parametrize("fmt", ["parquet", "duckdb", "csv", "jsonl"])
def test_output_columns_are_float_lists_and_json_text_in_csv(fake, workdir, fmt):
    out = workdir / "out" / f"r.{fmt}"
    apply(workdir, embed_job(workdir, texts(3), output=f"out/r.{fmt}"))
    if fmt == "parquet":
        assert str(pq.read_schema(out).field("vec").type) == "list<element: float>"
        vector = pq.read_table(out).column("vec")[0].as_py()
    elif fmt == "duckdb":
        db = duckdb.connect(str(out), read_only=True)
        assert db.execute("SELECT typeof(vec) FROM results LIMIT 1").fetchall() == [("FLOAT[8]",)]
        vector = db.execute("SELECT vec FROM results LIMIT 1").fetchall()[0][0]
        db.close()
    elif fmt == "csv":
        line = out.read_text().splitlines()[1]
        vector = json.loads(line[line.index('"[') + 1 : line.index(']"') + 1])
    else:
        vector = json.loads(out.read_text().splitlines()[0])["vec"]
    assert len(vector) == 8 and math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-5)


def test_a_sql_step_finds_near_duplicates_with_array_functions(fake, workdir):
    rows = texts(4) + [{"id": "copy", "text": texts(4)[1]["text"]}]
    near = {
        "sql": "SELECT a._row_key, max(array_cosine_similarity(a.vec, b.vec)) > 0.99 AS duplicate "
        "FROM rows a JOIN rows b ON a._row_key <> b._row_key GROUP BY a._row_key"
    }
    spec = embed_job(workdir, rows, steps={"near": near}, output="out/r.csv")
    assert apply(workdir, spec).status == "succeeded"
    out = duckdb.read_csv(str(workdir / "out" / "r.csv")).fetchall()
    flagged = sorted(r[0] for r in out if r[3] is True)
    assert flagged == ["copy", "r1"]


def test_mock_gives_deterministic_vectors_of_the_requested_size(fake, workdir):
    rows = texts(3)
    apply(workdir, embed_job(workdir, rows, step={"dimensions": 5}), mock=True)
    vectors = pq.read_table(workdir / "out" / "results.mock.parquet").column("vec").to_pylist()
    expected = [mock_vector(r["text"], 5) for r in rows]  # a function of the text alone
    assert [[round(v, 6) for v in vec] for vec in vectors] == [[round(v, 6) for v in vec] for vec in expected]
    assert fake.stats()["requests"] == 0


def test_the_plan_prices_input_tokens_only(workdir):
    spec = embed_job(workdir, texts(10))
    step = api.plan(spec, state=str(workdir / "state.duckdb"), save=False).header.steps[0]
    assert step.kind == "embed" and step.dimensions == 8 and step.counts.output_tokens_upper == 0
    assert step.counts.cost_upper == pytest.approx(step.counts.input_tokens * 0.02 / 1e6)
    assert not step.counts.estimated  # OpenAI's tokenizer: exact, without any chat overhead


@pytest.mark.parametrize(
    "model, dimensions, message",
    [
        ("gpt-4.1-mini", 8, "not an embedding model"),
        ("text-embedding-ada-002", 8, "cannot shorten"),
        ("text-embedding-3-small", 4096, "more than text-embedding-3-small gives"),
    ],
)
def test_the_plan_refuses_a_wrong_model_or_size(workdir, model, dimensions, message):
    spec = embed_job(workdir, texts(2), model=model, step={"dimensions": dimensions})
    with pytest.raises(SpecError, match=message):
        api.plan(spec, state=str(workdir / "state.duckdb"), save=False)


@pytest.mark.parametrize("block", [{}, {"custom": True}])
def test_anthropic_has_no_embeddings_and_the_plan_says_where_to_go(workdir, block):
    spec = embed_job(workdir, texts(2), provider="anthropic", model="claude-haiku-4-5", block=block)
    with pytest.raises(SpecError, match="anthropic has no embeddings API") as caught:
        api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
    assert "text-embedding-3-small" in (caught.value.hint or "")


def test_an_embedding_step_after_an_llm_step_embeds_its_answers(fake, workdir):
    summary = {"prompt": "Summarise: {{ row.text }}", "model": {"params": {"max_tokens": 30}}}
    spec = embed_job(workdir, texts(16), steps={"summary": summary}, step={"embed": "{{ summary }}"})
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded" and outcome.succeeded == 32
    stats = fake.stats()
    assert stats["by_endpoint"]["openai.chat_completions"] == 16 and sum(stats["embed_calls"]) == 16
    assert len(stats["embed_calls"]) < 16  # grouped, also while the summaries arrive row by row
    table = pq.read_table(workdir / "out" / "results.parquet").to_pylist()
    assert all(len(r["vec"]) == 8 for r in table)


def test_gemini_embeddings_job_from_a_file(fake, workdir):
    spec = embed_job(workdir, texts(12), provider="gemini", model="gemini-embedding-001", limits=FAST)
    files_before = fake.stats()["files"]  # the fake serves the whole session: earlier tests may leave some
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded" and outcome.succeeded == 12
    stats = fake.stats()
    assert stats["batches_created"] == 1 and stats["by_endpoint"] == {} and stats["batch_rows"] == 12
    assert stats["files"] == files_before  # the input and results files were deleted once stored
    recorded = attempts(workdir)
    plan_tokens = api.plan(spec, state=str(workdir / "x.duckdb"), save=False).header.steps[0].counts.input_tokens
    assert all(r[6] for r in recorded)  # no usage in the results: the plan's count, at the batch price
    assert sum(r[5] for r in recorded) == pytest.approx(plan_tokens * PRICE["gemini-embedding-001"] / 2 / 1e6)
    assert all(len(v) == 8 for v in pq.read_table(workdir / "out" / "results.parquet").column("vec").to_pylist())


def test_gemini_embedding_jobs_are_refused_on_vertex_ai(workdir):
    block = {"options": {"vertexai": True, "project": "p", "location": "us-central1"}}
    spec = embed_job(
        workdir, texts(2), provider="gemini", model="gemini-embedding-001", step={"mode": "batch"}, block=block
    )
    with pytest.raises(SpecError, match="Developer API only"):
        api.plan(spec, state=str(workdir / "state.duckdb"), save=False)


def test_a_later_prompt_sees_the_vector_as_a_list_of_floats(fake, workdir):
    after = {"prompt": "size {{ vec | length }}, first is a number: {{ vec[0] is number }}"}
    spec = embed_job(workdir, texts(3), steps={"after": after})
    assert apply(workdir, spec).status == "succeeded"
    stats = fake.stats()  # the three rows ask the same: one request
    assert stats["by_endpoint"]["openai.chat_completions"] == 1
    assert stats["by_prompt"][prompt_key("size 8, first is a number: True")] == 1


def test_quality_checks_read_the_vector_as_floats(workdir):
    spec = embed_job(workdir, texts(4))
    document = yaml.safe_load(spec.read_text())
    document["checks"] = [
        {"sql": "array_length(vec) = 8"},
        {"aggregate": "avg(array_inner_product(vec, vec))", "min": 0.999, "max": 1.001},
        {"sql": "array_length(vec) = 9", "name": "wrong size"},
    ]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = apply(workdir, spec, mock=True)
    assert {c.name: c.passed for c in result.checks.checks} == {
        "array_length(vec) = 8": True,
        "avg(array_inner_product(vec, vec))": True,
        "wrong size": False,
    }


def test_a_template_mistake_names_the_embed_key_and_its_line(workdir):
    spec = embed_job(workdir, texts(2), step={"embed": "{{ row.txt }}"})
    with pytest.raises(SpecError, match=r"spec.yaml:\d+: steps.vec.embed: `row.txt`.*did you mean 'text'"):
        api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
