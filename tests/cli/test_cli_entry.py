"""The `batchor` script's entry point: a Ctrl+C while the command line is still loading says
"interrupted" with exit 130, as later, and never prints a traceback."""

from __future__ import annotations

import os
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
        process = subprocess.Popen(
            [sys.executable, "-m", "batchor.cli.entry", "prices", "--json"],
            cwd=tmp_path,
            env=cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_foreground_job,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        if any(mark in err for mark in ("init_import_site", "Could not import runpy", "_get_module_details")):
            continue  # still in Python's own start (site, or runpy for -m), before any batchor code ran
        if "Exception ignored in" in err:
            continue  # Python will not raise in a callback
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
    process = subprocess.Popen(
        [sys.executable, "-m", "batchor.cli.entry", "plan", str(spec)],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_foreground_job,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / ".batchor").exists():
        time.sleep(0.02)  # planning has started: the state folder is being made
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == errors.EXIT_INTERRUPTED, err
    assert err.strip().endswith("interrupted") and "Traceback" not in err, err


# The `batchor` command in a child that reports, on the file descriptor READY_FD, the moment its
# first import of DuckDB reaches the C++ extension `_duckdb` (it only watches; the import is the real one).
_WATCHED_START = """
import os, sys
class Watch:
    def find_spec(self, name, path, target=None):
        if name == "_duckdb":
            sys.meta_path.remove(self)
            os.write(int(os.environ["READY_FD"]), b"!")
sys.meta_path.insert(0, Watch())
sys.argv = ["batchor", *sys.argv[1:]]
from batchor.cli.entry import main
main()
"""


def _ctrl_c_into_duckdb_init(folder: Path, after_s: float) -> subprocess.CompletedProcess[str]:
    """`batchor runs` (which loads the state, so DuckDB) sent a Ctrl+C `after_s` after DuckDB's
    extension starts loading: its C++ init takes some 20-60 ms and runs Python code (enums)."""
    ready, ready_w = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _WATCHED_START, "runs"],
            cwd=folder,
            env=cli_env(READY_FD=str(ready_w)),
            pass_fds=(ready_w,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_foreground_job,
        )
        os.close(ready_w)
        assert os.read(ready, 1) == b"!", "the command never imported DuckDB"
    finally:
        os.close(ready)
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.slow  # eight real processes
def test_ctrl_c_while_duckdb_initialises_says_interrupted_not_an_abort(tmp_path: Path):
    """DuckDB's C++ init aborted the process on a KeyboardInterrupt (exit -6, a C++ traceback) or
    lost the Ctrl+C (the command went on); batchor.duck holds it back until the import is done."""
    for after_s in (0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06):
        done = _ctrl_c_into_duckdb_init(tmp_path, after_s)
        assert done.returncode == errors.EXIT_INTERRUPTED, (after_s, done.returncode, done.stderr[-1500:])
        assert done.stderr.strip() == "interrupted", (after_s, done.stderr[-1500:])
    assert not (tmp_path / ".batchor").exists()


def test_a_ctrl_c_noted_inside_duckdbs_init_is_raised_once_it_is_done(tmp_path: Path):
    """The same moment made exact: `_thread.interrupt_main()` (a SIGINT as Python sees one) just as
    DuckDB's extension runs its init, with no Python bytecode in between."""
    start = _WATCHED_START.replace(
        """            os.write(int(os.environ["READY_FD"]), b"!")
""",
        """            spec = importlib.machinery.PathFinder.find_spec(name, path)
            spec.loader = InterruptedInit(spec.loader.name, spec.loader.path)
            return spec
""",
    ).replace(
        "import os, sys\n",
        """import _imp, _thread, functools, importlib.machinery, operator, os, sys
class InterruptedInit(importlib.machinery.ExtensionFileLoader):
    def exec_module(self, module):
        list(map(operator.call, [_thread.interrupt_main, functools.partial(_imp.exec_dynamic, module)]))
""",
    )
    done = subprocess.run(
        [sys.executable, "-c", start, "runs"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=as_foreground_job,
    )
    assert done.returncode == errors.EXIT_INTERRUPTED, (done.returncode, done.stdout, done.stderr[-1500:])
    assert done.stderr.strip() == "interrupted" and not done.stdout
