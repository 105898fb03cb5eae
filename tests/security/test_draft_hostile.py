"""`batchor draft` never executes what it drafted before approval: a drafter answer (which a prompt
injection in the sample rows could write) with SQL that writes or reads files is refused by the
parse check, or runs confined; nothing is written, nothing read outside reaches the model."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_helpers import run_inprocess
from tests.cli.test_cli_draft import drafted
from tests.conftest import write_csv
from tests.security.hostile import SECRET, project, snapshot  # noqa: F401 - the fixture


def _hostile(pwned, secret) -> list[dict]:
    copy_input = drafted()
    copy_input["spec"]["input"]["sql"] = f"SELECT * FROM input; COPY (SELECT 1) TO '{pwned}'"
    copy_step = drafted()
    copy_step["spec"]["steps"]["leak"] = {"sql": f"COPY (SELECT 1) TO '{pwned}'"}
    read_step = drafted("{{ leak.s }} {{ row.text }}")
    read_step["spec"]["steps"] = {
        "leak": {"sql": f"SELECT _row_key, (SELECT content FROM read_text('{secret}')) AS s FROM rows"},
        **read_step["spec"]["steps"],
    }
    return [copy_input, copy_step, read_step]


@pytest.fixture
def reviews(project):
    rows = [{"id": f"r{i}", "product": "kettle", "text": f"review {i}"} for i in range(4)]
    return write_csv(project / "data" / "reviews.csv", rows)


def test_drafted_sql_that_writes_or_reads_outside_is_never_run(fake, project, reviews, monkeypatch, capsys):
    pwned = project.parent / "outside" / "pwned.csv"
    secret = project.parent / "outside" / "secret.txt"
    fake.configure(scripted_answers=_hostile(pwned, secret))
    before = snapshot(project.parent / "outside")
    code, _out, err = run_inprocess(
        monkeypatch,
        capsys,
        project,
        "draft",
        "classify reviews",
        "--data",
        "data/reviews.csv",
        "--model",
        "openai:gpt-4.1",
        "-o",
        "x.yaml",
        "--max-cost",
        "1",
    )
    assert code == 1 and "error [draft_invalid]" in err
    assert "sql_not_allowed" in err and "path_outside_project" in err  # what went back to the model
    assert snapshot(project.parent / "outside") == before and not pwned.exists()
    assert SECRET not in json.dumps(fake.stats()["bodies"])
    assert not (project / "x.yaml").exists()
