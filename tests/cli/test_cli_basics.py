"""CLI basics: --version, -v/-q and BATCHOR_LOG through standard logging, --json on every command,
and the human tables of `status`, `runs` and `prices` (money as money, durations, no None)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import batchor
from batchor.cli.main import app
from batchor.version import __version__
from tests.cli.cli_helpers import run_cli
from tests.conftest import make_spec

RAW_FLOAT = re.compile(r"\d\.\d{7,}")  # 0.0016932000000000002: a float printed as Python stores it


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_version_in_process_and_as_the_real_command(tmp_path):
    assert invoke("--version").stdout.splitlines()[0] == f"batchor {__version__}"
    done = run_cli(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    first, origin, package = done.stdout.splitlines()
    assert first == f"batchor {__version__}" and origin.startswith("installed from: ")
    assert package == f"package: {Path(batchor.__file__).parent}"


def _all_commands(group: Any, prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (Typer vendors its own Click)
            found.update(_all_commands(command, f"{prefix}{name} "))
        else:
            found[prefix + name] = command
    return found


def test_every_command_accepts_json():
    commands = _all_commands(typer.main.get_command(app))
    assert {"apply", "status", "runs", "prices", "init", "spec-schema", "state check"} <= set(commands)
    lacking = [
        name for name, command in commands.items() if not any("--json" in param.opts for param in command.params)
    ]
    assert lacking == []


def test_init_and_spec_schema_print_json(workdir):
    created = json.loads(invoke("init", "job", "--json").stdout)
    assert len(created["created"]) == 4 and created["next"].startswith("batchor validate")
    schema = json.loads(invoke("spec-schema", "--json").stdout)
    assert schema["type"] == "object"


def test_verbose_logs_the_run_and_quiet_prints_no_summary(workdir, fake):
    spec = make_spec(workdir, rows=3)
    loud = invoke("-v", "apply", str(spec), "--yes")
    assert loud.exit_code == 0, loud.output
    assert re.search(r"INFO batchor\.engine: run_started run_id=\S+", loud.stderr)
    assert "DEBUG" not in loud.stderr
    quiet = invoke("-q", "apply", str(spec), "--yes", "--no-cache")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == "" and quiet.stdout == ""  # no plan, no summary, no logs
    assert fake.stats()["requests"] == 6


def test_batchor_log_sets_the_level_and_a_bad_level_is_a_usage_error(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=2)
    debug = invoke("apply", str(spec), "--yes", env={"BATCHOR_LOG": "debug"})
    assert debug.exit_code == 0 and "DEBUG batchor.engine: progress" in debug.stderr
    default = invoke("apply", str(spec), "--yes", env={"BATCHOR_LOG": ""})
    assert "batchor.engine" not in default.stderr
    done = batchor_cli(workdir, "status", env={"BATCHOR_LOG": "loud"})
    assert done.returncode == 64 and "BATCHOR_LOG='loud' is not a log level" in done.stderr


def test_verbose_and_quiet_together_are_refused():
    done = invoke("-v", "-q", "runs")
    assert done.exit_code == 2 and "contradict" in done.output


def test_status_runs_and_prices_are_tables_for_people(workdir, fake):
    fake.configure(fail_matching={"review number 3": 400})
    spec = make_spec(workdir, rows=12)
    assert invoke("apply", str(spec), "--yes").exit_code == 3
    data = json.loads(invoke("status", "--json").stdout)
    assert data["cost_usd"] > 0 and data["failures_by_reason"] == {"invalid_request": 1}
    human = invoke("status").stdout
    assert data["run_id"] in human and "partial" in human
    assert "None" not in human and not RAW_FLOAT.search(human)
    assert re.search(r"spend\s+\$0\.\d{4}: \$0\.\d{4} accepted", human)
    assert re.search(r"took (\d+\.\ds|\d+s|\d+m \d\ds)", human)  # a duration (0.4s, 12s, 1m 05s), not timestamps
    assert re.search(r"invalid_request\s+1\s+\$0", human)
    assert re.search(r"11 answered, 1 failed", human)
    runs = invoke("runs").stdout
    assert data["run_id"] in runs and "None" not in runs and not RAW_FLOAT.search(runs)
    ratio, moment = r"\d+\.\d\dx", r"\d\d:\d\d:\d\d"  # actual / expected (vs plan), started
    row = rf"{data['run_id']}\s+small\s+partial\s+11\s+1\s+\$0\.\d{{4}}\s+{ratio}\s+{moment}\s+\d+\.\ds"
    assert re.search(row, runs)
    prices = invoke("prices", "gpt-4.1-mini").stdout
    assert re.search(r"openai\s+gpt-4\.1-mini\s+\$0\.40\s+\$1\.60", prices), prices
    assert "None" not in prices


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0016932000000000002, "$0.0017"),
        (12.4, "$12.40"),
        (0, "$0"),
        (1234.567, "$1,234.57"),
        (0.00001234, "$0.000012"),
        (0.00001, "$0.00001"),
        (1.234e-8, "$0.000000012"),
        (None, "-"),
    ],
)
def test_money(value, shown):
    from batchor.humanize import money

    assert money(value) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.42, "0.4s"), (12.3, "12s"), (245, "4m 05s"), (7620, "2h 07m"), (3 * 86400 + 4 * 3600, "3d 4h"), (None, "-")],
)
def test_duration(seconds, shown):
    from batchor.humanize import duration

    assert duration(seconds) == shown
