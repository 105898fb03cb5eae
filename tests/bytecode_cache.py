"""The test run's own bytecode: compiled once per clone, not once per process.

Python writes a module's compiled form to `__pycache__` unless PYTHONDONTWRITEBYTECODE is set
(it is on the shared test machine, and often in CI). Without it every process of a run compiles
what it imports again: each xdist worker, each `batchor` subprocess, each fake server; and pytest
rewrites the asserts of every test module in each worker (~4.5 CPU-s for the suite, most of a
fresh clone's first-run cost). These helpers write only the project's own files (gitignored,
atomic writes, checked against the source), never the user's environment.
"""

from __future__ import annotations

import compileall
import os
import re
from pathlib import Path

import pytest

# Modules pytest compiles itself (with its asserts rewritten, under its own cache tag).
_REWRITTEN_BY_PYTEST = re.compile(r"(^|[/\\])(test_[^/\\]*|conftest)\.py$")


def compile_project(root: Path) -> None:
    """Compile batchor/ and the test helpers (the fake server's routes, the PostgreSQL starter...),
    so that subprocesses read what a module imported lazily would otherwise cost them each time.
    After the first run this only compares each file's size and mtime with its pyc."""
    for folder in ("batchor", "tests"):
        compileall.compile_dir(root / folder, quiet=2, rx=_REWRITTEN_BY_PYTEST)


def rewrite_a_share_of_the_test_modules(config: pytest.Config, root: Path) -> None:
    """In xdist worker K of N, rewrite and cache the asserts of test modules K, K+N, ... before
    collecting, so that each module is rewritten once per clone instead of once per worker (the
    others read it from `__pycache__` when they collect it). It uses pytest's own rewriting
    functions, which are not public: if they change, nothing is cached ahead and collection
    rewrites as it always did."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return
    modules = _test_modules_asked_for(config, root)
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for path in modules[int(worker[2:]) % count :: count]:
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc) is None and rewrite.try_makedirs(pyc.parent):
                source_hash, code = rewrite._rewrite_test(path, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, SyntaxError):
        return  # another pytest (or a module that does not parse): collection does it, and says why


def _test_modules_asked_for(config: pytest.Config, root: Path) -> list[Path]:
    """The test modules under the paths of the command line (testpaths when none), in one order."""
    found: set[Path] = set()
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path.is_dir():
            found.update(p for pattern in config.getini("python_files") for p in path.rglob(pattern))
        elif path.suffix == ".py":
            found.add(path)
    return sorted(p for p in found if p.is_relative_to(root / "tests") and p.name != "conftest.py")
