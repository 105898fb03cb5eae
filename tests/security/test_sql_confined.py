"""Spec SQL is one query, confined to the project: no second statement, no file written, nothing
read outside the project, no extension, no network (see batchor/spec/sql_guard.py)."""

from __future__ import annotations

import pytest

from batchor import api
from batchor.errors import PathOutsideProjectError, SpecProblemsError, SqlNotAllowedError, problems_of
from tests.security.hostile import SECRET, project, snapshot, write_job  # noqa: F401 - the fixture

PASSING_STEP = {"classify": {"prompt": "Review: {{ row.text }}"}}


def _codes(exc: pytest.ExceptionInfo) -> list[str]:
    return [p.code for p in problems_of(exc.value)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM input; COPY (SELECT 1) TO 'pwned.csv'",
        "COPY (SELECT * FROM input) TO 'pwned.csv'",
        "ATTACH 'pwned.duckdb' AS x",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "PRAGMA version",
        "EXPORT DATABASE 'pwned'",
        "CREATE SECRET s (TYPE s3, KEY_ID 'x', SECRET 'y')",
        "SELECT * FROM input; SELECT 1",
    ],
)
def test_input_sql_must_be_one_query(project, sql):
    spec = write_job(project, input={"path": "data.csv", "key": "id", "sql": sql})
    before = snapshot(project.parent)
    with pytest.raises(SqlNotAllowedError) as exc:
        api.validate(spec)
    assert f"{spec}:" in exc.value.message and "input.sql" in exc.value.message
    assert exc.value.code == "sql_not_allowed" and exc.value.hint
    assert snapshot(project.parent) == before  # validate wrote nothing at all


def test_every_sql_field_is_checked_and_each_problem_named(project):
    spec = write_job(
        project,
        steps={**PASSING_STEP, "route": {"sql": "COPY (SELECT 1) TO 'x.csv'"}},
        checks=[
            {"sql": "true) FROM answers; COPY (SELECT 1) TO 'y.csv'; SELECT (1"},
            {"aggregate": "count(*)) FROM answers; ATTACH 'z.db' AS z; SELECT (1", "min": 0},
            {"distribution": "classify", "max_share": 1},
        ],
    )
    with pytest.raises(SpecProblemsError) as exc:
        api.validate(spec)
    messages = "\n".join(p.message for p in problems_of(exc.value))
    assert _codes(exc) == ["sql_not_allowed"] * 3
    assert "steps.route.sql" in messages and "checks.0.sql" in messages and "checks.1.aggregate" in messages


def test_sql_step_cannot_read_a_file_outside_the_project(project):
    outside = project.parent / "outside" / "secret.txt"
    spec = write_job(
        project,
        steps={
            **PASSING_STEP,
            "leak": {"sql": f"SELECT _row_key, (SELECT content FROM read_text('{outside}')) AS s FROM rows"},
        },
    )
    with pytest.raises(PathOutsideProjectError) as exc:
        api.plan(spec)
    assert "steps.leak.sql" in exc.value.message and exc.value.code == "path_outside_project"


@pytest.mark.parametrize("literal", ["../outside/secret.txt", "link.csv", "https://127.0.0.1:9/x.csv", "~/.bashrc"])
def test_sql_step_reads_nothing_outside_by_relative_path_symlink_or_url(project, literal):
    (project / "link.csv").symlink_to(project.parent / "outside" / "secret.txt")
    spec = write_job(
        project,
        steps={
            **PASSING_STEP,
            "join": {"sql": f"SELECT rows._row_key, s.text AS s FROM rows, read_csv('{literal}') s"},
        },
    )
    with pytest.raises(PathOutsideProjectError):
        api.plan(spec)


def test_input_sql_cannot_read_outside_the_project(project):
    spec = write_job(
        project,
        input={
            "path": "data.csv",
            "key": "id",
            "sql": f"SELECT * FROM read_csv('{project.parent / 'outside' / 'secret.txt'}')",
        },
    )
    with pytest.raises(PathOutsideProjectError) as exc:
        api.plan(spec)
    assert SECRET not in str(exc.value)


def test_sql_step_still_joins_a_file_inside_the_project(project):
    (project / "lookup").mkdir()
    (project / "lookup" / "teams.csv").write_text("id,team\nr0,red\nr1,blue\nr2,red\n", encoding="utf-8")
    spec = write_job(
        project,
        steps={
            "team": {"sql": "SELECT rows._row_key, t.team FROM rows JOIN read_csv('lookup/*.csv') t ON t.id = rows.id"},
            "classify": {"prompt": "{{ team.team }}: {{ row.text }}"},
        },
    )
    result = api.apply(spec)
    assert result.status == "succeeded"


def test_check_expression_runs_confined(project):
    outside = project.parent / "outside" / "secret.txt"
    spec = write_job(project, checks=[{"sql": f"(SELECT count(*) FROM read_text('{outside}')) = 1"}])
    with pytest.raises(PathOutsideProjectError) as exc:
        api.apply(spec)
    assert "checks: check" in exc.value.message and SECRET not in str(exc.value)


def test_validate_writes_nothing_and_opens_no_socket(project, monkeypatch):
    import socket

    (project / "teams.csv").write_text("id,team\nr0,red\n", encoding="utf-8")
    spec = write_job(
        project,
        input={"path": "data.csv", "key": "id", "sql": "SELECT * FROM input WHERE id <> 'x'"},
        steps={
            "team": {"sql": "SELECT rows._row_key, t.team FROM rows LEFT JOIN read_csv('teams.csv') t USING (id)"},
            "classify": {"prompt": "{{ team.team }} {{ row.text }}"},
        },
        checks=[{"sql": "length(classify) > 0"}],
    )

    def refused(*_args):
        raise AssertionError("validate opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket.socket, "connect_ex", refused)
    before = snapshot(project.parent)
    assert api.validate(spec)
    assert snapshot(project.parent) == before
