"""`batchor prune --compact` shrinks the DuckDB state file and keeps every answer; it refuses
while an apply holds the state."""

from __future__ import annotations

import json
import signal

import pytest
from cli_helpers import Background, wait_until
from conftest import make_spec, write_csv


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_prune_compact_shrinks_the_file_and_keeps_answers(workdir, fake, batchor_cli):
    # 100 long rows: the state's bytes of 300 shorter ones (blocks to free) for a third of the requests
    spec = make_spec(workdir, rows=100)
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": f"review {i} " + "words " * 600} for i in range(100)])
    assert batchor_cli(workdir, "apply", spec, "--yes", timeout=300).returncode == 0
    # Asked again, every answer replaces the one stored: the old ones leave free blocks behind
    # (one apply alone writes its state without any: nothing for --compact to give back).
    assert batchor_cli(workdir, "apply", spec, "--yes", "--no-cache", timeout=300).returncode == 0
    state = workdir / ".batchor" / "state.duckdb"
    before = state.stat().st_size

    pruned = batchor_cli(workdir, "prune", "--compact", "--json")
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)
    assert report["raw_payloads_dropped"] == 200  # both runs' attempts
    assert report["bytes_before"] == before and report["bytes_after"] == state.stat().st_size
    assert report["bytes_freed"] == before - state.stat().st_size > 0

    again = batchor_cli(workdir, "apply", spec, "--yes", timeout=300)  # every answer still cached
    assert again.returncode == 0 and "100 rows cached" in again.stderr
    assert fake.stats()["requests"] == 200


@pytest.mark.slow  # a real apply in another process holds the state, then is interrupted
def test_prune_compact_refuses_while_an_apply_runs(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=40, limits={"concurrency": 1, "max_attempts": 3})
    fake.configure(latency_ms=500)
    with Background(workdir, "apply", spec, "--yes") as running:
        wait_until(lambda: fake.stats()["answered"] >= 1, timeout=120, what="the apply to start")
        refused = batchor_cli(workdir, "prune", "--compact")
        assert refused.returncode == 8, refused.stderr
        assert "error [state_locked]" in refused.stderr
        running.process.send_signal(signal.SIGINT)
        assert running.wait(timeout=120) == 130
