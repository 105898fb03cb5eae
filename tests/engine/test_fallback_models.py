"""Fallback models (engine/fallback.py): rows one model fails (malformed answers, 503s, quota)
are answered by the next model of `model.fallback`, another provider included, through the real
SDKs against the fake; the output names the model that answered, spend per model adds up to the
ledger, and a second apply pays nothing again."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import make_spec

from batchor import api

STATE = Path(".batchor") / "state.duckdb"
PRIMARY, BACKUP = "gpt-4.1-mini", "claude-haiku-4-5"


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


def fallback_spec(workdir: Path, rows: int = 8, **model: object) -> Path:
    block = {
        "provider": "openai",
        "name": PRIMARY,
        "params": {"temperature": 0, "max_tokens": 50},
        "fallback": [f"anthropic:{BACKUP}"],
        **model,
    }
    path = make_spec(
        workdir,
        rows=rows,
        output={"path": "out/results.parquet"},
        limits={"concurrency": 4, "max_attempts": 2, "request_timeout_s": 10},
    )
    spec = yaml.safe_load(path.read_text())
    spec["model"] = block
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def outputs(workdir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(workdir / "out" / "results.parquet").to_pylist()}


@pytest.mark.parametrize("fault", ["malformed", 503])
def test_rows_the_model_fails_are_answered_by_the_fallback(workdir, fake, fault):
    fake.configure(fail_model={PRIMARY: {"review number 1": fault, "review number 5": fault}})
    outcome = api.apply(fallback_spec(workdir), handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("succeeded", 8, 0)
    rows = outputs(workdir)
    assert {k: r["_model"] for k, r in rows.items() if r["_model"] != f"openai:{PRIMARY}"} == {
        "r1": f"anthropic:{BACKUP}",
        "r5": f"anthropic:{BACKUP}",
    }
    assert all(r["_status"] == "succeeded" and r["classify.sentiment"] for r in rows.values())
    # the failed request keeps its own key and failure; the answer has the fallback model's key
    linked = query(workdir, "SELECT model, error_code, answered_by IS NOT NULL FROM results WHERE status = 'failed'")
    code = "invalid_output" if fault == "malformed" else "provider_unavailable"
    assert linked == [(f"openai:{PRIMARY}", code, True)] * 2
    # spend per model adds up to the ledger, and the ledger to the run
    per_model = dict(query(workdir, "SELECT model, sum(cost_usd) FROM attempts GROUP BY 1"))
    assert set(per_model) == {f"openai:{PRIMARY}", f"anthropic:{BACKUP}"} and per_model[f"anthropic:{BACKUP}"] > 0
    ledger = query(workdir, "SELECT sum(cost_usd) FROM attempts")[0][0]
    assert sum(per_model.values()) == pytest.approx(ledger)
    assert outcome.cost_usd == pytest.approx(ledger)


def test_a_second_apply_reads_the_fallback_answers_without_paying(workdir, fake):
    fake.configure(fail_model={PRIMARY: {"review number 2": "malformed"}})
    spec = fallback_spec(workdir, rows=4)
    api.apply(spec, handle_signals=False)
    answered = fake.stats()["answered"]
    again = api.apply(spec, handle_signals=False)
    assert (again.status, again.failed) == ("succeeded", 0)
    assert {r["_status"] for r in outputs(workdir).values()} == {"succeeded"}
    assert fake.stats()["answered"] == answered  # nothing asked again, the fallback answer included
    assert outputs(workdir)["r2"]["_model"] == f"anthropic:{BACKUP}"


def test_only_the_chosen_conditions_move_a_row_on(workdir, fake):
    fake.configure(fail_model={PRIMARY: {"review number 1": "malformed"}})
    outcome = api.apply(fallback_spec(workdir, rows=3, fallback_on=["quota"]), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (2, 1)
    assert outputs(workdir)["r1"]["_status"] == "failed"
    assert query(workdir, "SELECT count(*) FROM attempts WHERE model LIKE 'anthropic:%'") == [(0,)]


def test_a_model_out_of_quota_sends_every_row_to_the_fallback(workdir, fake):
    fake.configure(fail_model={PRIMARY: {"review": "quota"}})
    outcome = api.apply(fallback_spec(workdir, rows=6), handle_signals=False)
    assert (outcome.status, outcome.succeeded) == ("succeeded", 6)
    assert {r["_model"] for r in outputs(workdir).values()} == {f"anthropic:{BACKUP}"}
    # the first quota error marks the model down: later rows do not ask it again
    asked = query(workdir, f"SELECT count(*) FROM attempts WHERE model = 'openai:{PRIMARY}'")[0][0]
    assert asked <= 4  # at most the rows already in flight (concurrency 4)


def test_a_fallback_model_must_be_provider_and_name(workdir):
    spec = fallback_spec(workdir, fallback=["claude-haiku-4-5"])
    with pytest.raises(Exception) as info:
        api.validate(spec)
    assert "must be provider:name" in str(info.value)


def test_status_shows_calls_and_spend_per_model(workdir, fake, monkeypatch, capsys):
    """`status` says whose the spend was: one line per model of the step, adding up to the run."""
    from batchor import operations
    from tests.cli.cli_helpers import run_inprocess

    fake.configure(fail_model={PRIMARY: {"review number 1": "malformed", "review number 5": "malformed"}})
    outcome = api.apply(fallback_spec(workdir), handle_signals=False)
    models = {m["model"]: m for m in operations.status(state=str(workdir / STATE))["models"]}
    assert set(models) == {f"openai:{PRIMARY}", f"anthropic:{BACKUP}"}
    calls = {model: (m["answered"], m["failed"]) for model, m in models.items()}
    assert calls == {f"openai:{PRIMARY}": (6, 4), f"anthropic:{BACKUP}": (2, 0)}  # 2 rows rejected twice
    assert sum(m["cost_usd"] for m in models.values()) == pytest.approx(outcome.cost_usd)
    code, out, _ = run_inprocess(monkeypatch, capsys, workdir, "status")
    assert code == 0 and "by model" in out and f"anthropic:{BACKUP}" in out, out
    from batchor.report import report

    markdown = report(state=str(workdir / STATE), fmt="markdown")
    assert f"| classify | anthropic:{BACKUP} | 2 | 0 |" in markdown, markdown
    html = report(state=str(workdir / STATE), fmt="html")
    section = html.split("<h2>By model</h2>")[1].split("</table>")[0]
    assert f"<td>anthropic:{BACKUP}</td><td class=n>2</td><td class=n>0</td>" in section, section
    assert f"<td>openai:{PRIMARY}</td><td class=n>6</td><td class=n>4</td>" in section, section


def test_one_model_per_step_shows_no_table_by_model(workdir, fake, monkeypatch, capsys):
    """Without a fallback answer each step's own line says whose the spend was: no table in
    `status`, the markdown report or the HTML report."""
    from batchor.report import report
    from tests.cli.cli_helpers import run_inprocess

    api.apply(fallback_spec(workdir, rows=3), handle_signals=False)
    code, out, _ = run_inprocess(monkeypatch, capsys, workdir, "status")
    assert code == 0 and "by model" not in out, out
    assert "By model" not in report(state=str(workdir / STATE), fmt="markdown")
    assert "By model" not in report(state=str(workdir / STATE), fmt="html")
