"""The `batchor` script's entry point: a Ctrl+C while the command line is still loading says
"interrupted" with exit 130, as later, and never prints a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from cli_helpers import ROOT, as_foreground_job, cli_env
from conftest import make_spec

from batchor import errors
from batchor.cli import entry


def test_the_script_starts_at_the_entry_point_with_the_error_trees_exit_code():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["batchor"] == "batchor.cli.entry:main"
    assert entry.EXIT_INTERRUPTED == errors.EXIT_INTERRUPTED


@pytest.mark.slow  # real processes signalled at several moments of their start
def test_ctrl_c_at_any_moment_of_the_start_says_interrupted_without_a_traceback(tmp_path: Path):
    interrupted = 0
    for delay in (0.08, 0.15, 0.25, 0.4, 0.6):
        process = subprocess.Popen([sys.executable, "-m", "batchor.cli.entry", "prices", "--json"], cwd=tmp_path,
                                   env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=as_foreground_job)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        if any(mark in err for mark in ("init_import_site", "Could not import runpy", "_get_module_details")):
            continue  # still in Python's own start (site, or runpy for -m), before any batchor code ran
        if "Exception ignored in" in err or (process.returncode < 0 and "duckdb" in err):
            continue  # Python will not raise in a callback; DuckDB's C++ init aborts on it (see the README)
        assert "Traceback" not in err, (delay, err)
        assert process.returncode in (0, errors.EXIT_INTERRUPTED), (delay, process.returncode, err)
        if process.returncode == errors.EXIT_INTERRUPTED:
            assert err.strip().endswith("interrupted"), err
            interrupted += 1
    assert interrupted >= 2  # most signals arrive before `prices` has finished


@pytest.mark.slow  # a real process
def test_ctrl_c_while_a_command_works_says_interrupted(tmp_path: Path):
    """Typer turns a KeyboardInterrupt inside a command into a bare exit 130: the word is ours."""
    spec = make_spec(tmp_path, rows=20_000)
    process = subprocess.Popen([sys.executable, "-m", "batchor.cli.entry", "plan", str(spec)], cwd=tmp_path,
                               env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_foreground_job)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / ".batchor").exists():
        time.sleep(0.02)  # planning has started: the state folder is being made
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == errors.EXIT_INTERRUPTED, err
    assert err.strip().endswith("interrupted") and "Traceback" not in err, err
