"""API keys never reach the state, plan files, outputs or anything the CLI prints."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import duckdb
import pytest
from conftest import make_spec

from batchor.state.raw import unpack


def text_in_state(state: Path) -> str:
    """Every value of every table, raw payloads decompressed: a plain grep of the file could miss
    a key DuckDB stored compressed."""
    parts = []
    with duckdb.connect(str(state), read_only=True) as db:
        tables = [t for (t,) in db.execute("SELECT table_name FROM information_schema.tables").fetchall()]
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


KEYS = {
    "openai": ("OPENAI_API_KEY", "gpt-4.1-mini"),
    "anthropic": ("ANTHROPIC_API_KEY", "claude-haiku-4-5"),
    "gemini": ("GEMINI_API_KEY", "gemini-2.5-flash"),
}


@pytest.mark.parametrize(("provider", "echo"), [("openai", "full"), *((p, "part") for p in KEYS)])
def test_key_is_never_written_or_printed(workdir, fake, batchor_cli, provider, echo):
    """Even when the provider's error messages quote the key, whole or its first half ("part":
    "Incorrect API key provided: sk-test-secr*********3456", as OpenAI does)."""
    env, model = KEYS[provider]
    secret = os.environ[env]
    assert secret.startswith(("sk-", "gemini-")) and len(secret) >= 24
    fake.configure(fail_matching={"review number 1": 400, "review number 2": 401}, echo_key=echo)
    spec = make_spec(workdir, rows=4, provider=provider, model=model)
    texts = []
    for args in (
        ["plan", spec, "--json"],
        ["-vv", "apply", spec, "--yes"],  # debug logs too
        ["apply", spec, "--yes", "--json"],  # the failed rows are asked again
        ["status", "--json"],
        ["export", "--attempts", "-o", workdir / "attempts.csv"],
    ):
        result = batchor_cli(workdir, *args)
        texts.append(result.stdout + result.stderr)
    assert "401" in texts[1]  # the auth error reached the user, without the key
    assert "Incorrect API key provided: [REDACTED]" in texts[1]

    state = workdir / ".batchor" / "state.duckdb"
    files = [
        state,
        *sorted((workdir / ".batchor" / "plans").glob("*.plan")),
        workdir / "out" / "results.csv",
        workdir / "attempts.csv",
    ]
    assert all(path.exists() for path in files) and len(files) >= 4
    state_text = text_in_state(state)
    # the scan does see stored errors and the decompressed raw responses
    assert "injected fault" in state_text
    assert any(raw in state_text for raw in ('"object":"chat.completion"', '"type":"message"', '"candidates":'))
    texts += [state_text] + [path.read_bytes().decode("utf-8", "replace") for path in files[1:]]
    for text in texts:
        assert secret not in text and secret[:12] not in text
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
