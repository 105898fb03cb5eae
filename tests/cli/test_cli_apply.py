"""`batchor apply` as a user runs it: approval, budget, keys, NDJSON events and exit codes."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import yaml
from cli_helpers import ndjson
from conftest import make_spec, write_csv

from batchor import api


def read_output(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_apply_without_tty_needs_approval(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    result = batchor_cli(workdir, "apply", spec, "--json")  # stdin on /dev/null: no terminal to ask on
    assert result.returncode == 6, result.stderr
    assert "error [approval_required]" in result.stderr and "--max-cost" in result.stderr
    events = ndjson(result.stdout)  # with --json the error is an event too
    assert [(e["event"], e["code"]) for e in events] == [("error", "approval_required")]
    assert fake.stats()["requests"] == 0


def test_apply_with_yes_runs_and_reports(workdir, fake, batchor_cli):
    """In this process; the real `batchor apply` process is driven by test_cli_exit.py (its output and
    state complete at exit), test_startup_imports.py and test_cli_run_truth.py (signals)."""
    spec = make_spec(workdir, rows=3)
    result = batchor_cli(workdir, "apply", spec, "--yes")
    assert result.returncode == 0, result.stderr
    summary = "succeeded: 3 rows: 3 requests; requests 3 answered, 0 failed; rows 3 succeeded; 0 rows cached"
    assert summary in result.stderr
    assert fake.stats()["requests"] == 3
    rows = read_output(workdir / "out" / "results.csv")
    assert [r["_status"] for r in rows] == ["succeeded"] * 3


def test_max_cost_below_the_upper_bound_refuses_before_any_call(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=5)
    upper = api.plan(spec, save=False).header.totals.cost_upper
    result = batchor_cli(workdir, "apply", spec, "--max-cost", f"{upper * 0.9:.8f}")
    assert result.returncode == 4, result.stderr
    assert "error [cost_limit]" in result.stderr and "nothing was sent" in result.stderr
    assert fake.stats()["requests"] == 0
    assert not (workdir / "out" / "results.csv").exists()


def with_model(spec: Path, **model) -> Path:
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"].update(model)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def compatible_spec(workdir, fake, **extra) -> Path:
    spec = make_spec(workdir, rows=3, provider="openai-compatible", model="house-model")
    return with_model(spec, base_url=fake.openai_base_url, **extra)


def test_unpriced_model_with_max_cost_is_no_price(workdir, fake, batchor_cli):
    spec = compatible_spec(workdir, fake, custom=True)  # declared custom: accepted, but unpriced
    result = batchor_cli(workdir, "apply", spec, "--max-cost", "5")
    assert result.returncode == 4, result.stderr
    assert "error [no_price]" in result.stderr and "openai-compatible:house-model" in result.stderr
    assert "price:" in result.stderr
    assert fake.stats()["requests"] == 0


def test_unpriced_model_with_a_spec_price_runs_under_max_cost(workdir, fake, batchor_cli):
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    spec = compatible_spec(workdir, fake, price=price)
    result = batchor_cli(workdir, "apply", spec, "--max-cost", "5")
    assert result.returncode == 0, result.stderr
    assert fake.stats()["requests"] == 3
    assert fake.stats()["by_endpoint"] == {"openai.chat_completions": 3}


def test_missing_api_key_names_the_variable_and_sends_nothing(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    result = batchor_cli(workdir, "apply", spec, "--yes", env={"OPENAI_API_KEY": None})
    assert result.returncode == 1, result.stderr
    assert "error [no_api_key]" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert fake.stats()["requests"] == 0


def test_json_emits_ndjson_events(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=4)
    result = batchor_cli(workdir, "apply", spec, "--yes", "--json")
    assert result.returncode == 0, result.stderr
    events = ndjson(result.stdout)  # every line parses: nothing but events on stdout
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "progress" in kinds
    finished = events[-1]
    assert (finished["status"], finished["succeeded"], finished["failed"]) == ("succeeded", 4, 0)
    assert all(isinstance(e["at"], float) for e in events)
    run_ids = {e["run_id"] for e in events if "run_id" in e}
    assert len(run_ids) == 1


def test_a_row_rejected_with_400_fails_alone_exit_3(workdir, fake, batchor_cli):
    fake.configure(fail_matching={"review number 2": 400})
    spec = make_spec(workdir, rows=5)
    result = batchor_cli(workdir, "apply", spec, "--yes")
    assert result.returncode == 3, result.stderr
    assert "partial: 5 rows: 5 requests; requests 4 answered, 1 failed; rows 4 succeeded, 1 failed;" in result.stderr
    rows = {r["id"]: r for r in read_output(workdir / "out" / "results.csv")}
    assert rows["r2"]["_status"] == "failed"
    assert rows["r2"]["_error"].startswith("classify: invalid_request: ")
    assert rows["r2"]["classify.sentiment"] == ""
    others = [r for key, r in rows.items() if key != "r2"]
    assert all(r["_status"] == "succeeded" and r["_error"] == "" and r["classify.sentiment"] for r in others)
    # a 400 is terminal: asked once, never retried
    assert fake.stats()["by_status"] == {"200": 4, "400": 1}


def test_mock_makes_no_calls(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=4)
    result = batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    assert result.returncode == 0, result.stderr
    assert "(mock provider)" in result.stderr
    assert fake.stats()["requests"] == 0
    rows = read_output(workdir / "out" / "results.mock.csv")  # a rehearsal: beside the spec's output
    assert not (workdir / "out" / "results.csv").exists()
    assert all(r["classify.sentiment"] in ("positive", "negative", "mixed") for r in rows)
    assert all(1 <= int(r["classify.score"]) <= 5 for r in rows)


def test_stale_plan_exit_5(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    plan_file = workdir / api.plan(spec).saved_path
    write_csv(workdir / "data.csv", [{"id": "r0", "text": "edited"}])
    result = batchor_cli(workdir, "apply", plan_file)
    assert result.returncode == 5, result.stderr
    assert "error [stale_plan]" in result.stderr
    assert fake.stats()["requests"] == 0


def test_tampered_plan_exit_5(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    plan_file = workdir / api.plan(spec).saved_path
    with zipfile.ZipFile(plan_file) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["plan.json"] = members["plan.json"].replace(b"Classify.", b"Classifx.")
    with zipfile.ZipFile(plan_file, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    result = batchor_cli(workdir, "apply", plan_file)
    assert result.returncode == 5, result.stderr
    assert "error [plan_invalid]" in result.stderr
    assert fake.stats()["requests"] == 0


def test_saved_plan_file_applies_without_its_spec_and_without_asking(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    planned = batchor_cli(workdir, "plan", spec, "--json", "--out", workdir / "job.plan")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["totals"]["to_run"] == 3
    spec.unlink()
    result = batchor_cli(workdir, "apply", workdir / "job.plan")  # the reviewed plan is the approval
    assert result.returncode == 0, result.stderr
    assert fake.stats()["requests"] == 3
