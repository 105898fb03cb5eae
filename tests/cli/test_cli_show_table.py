"""`batchor show`'s human table: one line per step, money as money, `-` for nothing (never None),
totals under it; `--json` is the plan view as data, unchanged."""

from __future__ import annotations

import json
import re

import yaml
from conftest import make_spec

from batchor import api
from batchor.plan.show import plan_view
from tests.cli.cli_helpers import run_inprocess

SQL_STEP = {"sql": "SELECT _row_key FROM rows WHERE classify.sentiment <> 'mixed'"}
REPLY_STEP = {"prompt": "Reply to: {{ row.text }}", "depends_on": ["keep"]}


def test_show_prints_a_steps_table_with_money_and_no_none(workdir, monkeypatch, capsys):
    spec = make_spec(workdir, rows=5)
    data = yaml.safe_load(spec.read_text())
    data["steps"].update(keep=SQL_STEP, reply={**REPLY_STEP, "model": {"name": "ft:house", "custom": True}})
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = run_inprocess(monkeypatch, capsys, workdir, "show", "spec.yaml")
    assert code == 0, err
    assert "None" not in out and "nan" not in out.lower()
    table = out[out.index("steps: 3 ") : out.index("step classify:")]
    rows = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip() and line.strip()[0] not in "─"}
    assert re.search(
        r"classify\s+openai:gpt-4\.1-mini\s+realtime\s+5\s+5\s+0\s+[\d,]+\s+~[\d,]+\s+"
        r"\$0\.\d{4}\s+\$0\.\d{4}$",
        rows["classify"],
    ), rows["classify"]
    assert re.search(r"keep\s+SQL\s+-\s+5(\s+-){6}$", rows["keep"]), rows["keep"]
    assert re.search(r"reply\s+openai:ft:house\s+realtime\s+5\s+5\s+0\s+.*no price\s+-$", rows["reply"]), rows["reply"]
    compiled = api.plan(spec, save=False)
    t = compiled.header.totals
    assert re.search(rf"total\s+5\s+{t.to_run}\s+.*\${t.cost_expected:.4f}\s+\${t.cost_upper:.4f}$", rows["total"])
    assert "made        20" in out and "T" not in out.split("made")[1].split(" by ")[0]  # a time, not ISO text


def test_show_json_is_the_plan_view_unchanged(workdir, monkeypatch, capsys):
    make_spec(workdir, rows=2)
    code, out, err = run_inprocess(monkeypatch, capsys, workdir, "plan", "spec.yaml", "--out", "p.plan")
    assert code == 0, err
    code, out, err = run_inprocess(monkeypatch, capsys, workdir, "show", "p.plan", "--json")
    assert code == 0, err
    expected = json.loads(json.dumps(plan_view(api.load_or_plan("p.plan")), default=str))
    assert json.loads(out) == expected and "steps: " not in out
