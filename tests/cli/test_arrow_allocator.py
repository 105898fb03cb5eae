"""The CLI's process allocates Arrow memory with jemalloc, which gives freed memory back to the
system (mimalloc, Arrow's default, keeps it: a big export's peak grew part after part)."""

from __future__ import annotations

import os
import sys

import pytest

from batchor import arrow_pool

linux_x86 = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64",
    reason="Arrow's jemalloc pool ships in its Linux x86-64 wheels",
)


@linux_x86
def test_the_cli_picks_arrows_jemalloc_pool(monkeypatch):
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    arrow_pool.prefer_before_import()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"


def test_a_pool_the_user_chose_is_kept(monkeypatch):
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    arrow_pool.prefer_before_import()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
