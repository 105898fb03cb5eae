"""A database password given in `--state postgresql://user:PASSWORD@host/db` (or in the spec's
`state:`) never reaches a file: not the saved plan, the state, the outputs, the events, or what the
CLI prints. Runs against the real PostgreSQL test server (tests/pg_server.py).

The test server trusts local connections, so it cannot show which source libpq took the
password from; it shows that a plan saved without it still applies (the password then comes from
the URL given at run time, PGPASSWORD or ~/.pgpass, all read by libpq).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import make_spec

from batchor.state import open_state
from tests.cli.cli_helpers import cli_env, run_cli

pytestmark = pytest.mark.slow  # signals, kills or large files: CI's full tier

PASSWORD = "Pw-n0t-in-any-file-7781"
SLOW = 180  # a loaded 2-core machine can take 20 s per CLI start


def with_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{PASSWORD}@{host}"


def files_text(folder: Path) -> str:
    """Every file under `folder`, zip members (plan files) read one by one."""
    parts = []
    for path in [folder] if folder.is_file() else folder.rglob("*"):
        if not path.is_file():
            continue
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                parts += [archive.read(name).decode("utf-8", "replace") for name in archive.namelist()]
        parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def database_text(url: str) -> str:
    store = open_state(url)
    tables = [
        t
        for (t,) in store.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    ]
    return "\n".join(str(row) for table in tables for row in store.execute(f'SELECT * FROM "{table}"'))


def test_a_database_password_is_in_no_plan_state_output_or_log(workdir, fake, pg_url):
    secret_url = with_password(pg_url)
    spec = make_spec(workdir, rows=6)
    env = cli_env(PGPASSWORD=PASSWORD)
    printed = []
    for args in (
        ["plan", spec, "--state", secret_url, "--out", "job.plan", "--json"],
        ["apply", "job.plan", "--max-cost", "1", "--json"],  # the plan's URL, password from PGPASSWORD
        ["apply", spec, "--state", secret_url, "--yes"],
        ["status", "--state", secret_url, "--json"],
        ["runs", "--state", secret_url],
        ["export", "--state", secret_url, "-o", "exported.csv"],
    ):
        result = run_cli(workdir, *args, env=env, timeout=SLOW)
        assert result.returncode == 0, (args, result.stderr)
        printed.append(result.stdout + result.stderr)
    assert fake.stats()["requests"] == 6  # the saved plan ran against the database without the password
    for where, text in (
        ("printed", "\n".join(printed)),
        ("files", files_text(workdir)),
        ("database", database_text(pg_url)),
    ):
        assert PASSWORD not in text, where


def test_a_password_in_the_specs_state_is_cut_from_the_saved_plan(workdir, fake, pg_url):
    spec = make_spec(workdir, rows=2)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    spec.write_text(yaml.safe_dump({**data, "state": with_password(pg_url)}, sort_keys=False), encoding="utf-8")
    result = run_cli(workdir, "plan", spec, "--out", "job.plan", timeout=SLOW)
    assert result.returncode == 0, result.stderr
    saved = files_text(workdir / "job.plan")
    assert PASSWORD not in saved and pg_url.rpartition("@")[2] in saved  # the URL is kept, without it
