"""API keys never reach the state, plan files, outputs or anything the CLI prints."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import duckdb
from conftest import make_spec

from batchor.state.raw import unpack

SECRET = "sk-test-secret-key-123456"  # what the `fake` fixture exports as OPENAI_API_KEY


def text_in_state(state: Path) -> str:
    """Every value of every table, raw payloads decompressed: a plain grep of the file could miss
    a key DuckDB stored compressed."""
    parts = []
    with duckdb.connect(str(state), read_only=True) as db:
        tables = [
            t for (t,) in db.execute("SELECT table_name FROM information_schema.tables").fetchall()
        ]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"').fetchall():
                for value in row:
                    if isinstance(value, bytes):
                        try:
                            value = unpack(value)
                        except zlib.error:
                            pass
                        value = value.decode("utf-8", "replace")
                    parts.append(str(value))
    return "\n".join(parts)


def test_key_is_never_written_or_printed(workdir, fake, batchor_cli):
    assert os.environ["OPENAI_API_KEY"] == SECRET
    fake.configure(fail_matching={"review number 1": 400, "review number 2": 401})
    spec = make_spec(workdir, rows=4)
    texts = []
    for args in (
        ["plan", spec, "--json"],
        ["apply", spec, "--yes"],
        ["apply", spec, "--yes", "--json"],  # the failed rows are asked again
        ["status", "--json"],
    ):
        result = batchor_cli(workdir, *args)
        texts.append(result.stdout + result.stderr)
    assert "status 401" in texts[1]  # the auth error reached the user, without the key

    state = workdir / ".batchor" / "state.duckdb"
    files = [
        state,
        *sorted((workdir / ".batchor" / "plans").glob("*.plan")),
        workdir / "out" / "results.csv",
    ]
    assert len(files) >= 3
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    state_text = text_in_state(state)
    # the scan does see stored errors and the decompressed raw responses
    assert "injected fault" in state_text and '"object":"chat.completion"' in state_text
    assert SECRET not in state_text
    for text in texts:
        assert SECRET not in text
