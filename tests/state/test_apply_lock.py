"""The apply lock: one holder at a time, named to the second comer; no `fcntl` needed to import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from batchor.errors import StateLockedError
from batchor.state import ApplyLock


def test_a_second_holder_is_refused_with_the_first_named(tmp_path):
    path = tmp_path / "state.duckdb.lock"
    with ApplyLock(path):
        with pytest.raises(StateLockedError) as refused:
            ApplyLock(path).acquire()
        assert f"pid {os.getpid()}" in refused.value.message
    with ApplyLock(path):  # released: free again
        pass


def test_import_batchor_works_without_fcntl():
    """Windows has no `fcntl`: importing the package (and the lock module) must not need it."""
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import batchor, batchor.api, batchor.cli.main, batchor.state.lock\n"
        "print('imported')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
