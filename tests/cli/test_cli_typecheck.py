"""Type-checked templates through the real CLI: a misspelt field of an earlier step, a text step
read as if it had fields, a SQL step column or a `when:` name fails `validate`, `plan` and `apply`
before any call, with file:line and the closest names."""

from __future__ import annotations

import yaml
from conftest import SENTIMENT_SCHEMA, make_spec


def two_step_spec(workdir, second_prompt: str, when: str | None = None, extra_yaml: str = ""):
    """classify (structured) -> summary (text) -> [extra steps, as YAML text] -> reply."""
    spec = make_spec(workdir, rows=3)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["steps"]["summary"] = {"prompt": "Summarise: {{ row.text }}", "output": "text"}
    data["steps"]["reply"] = {"prompt": second_prompt, "output": "text"}
    if when:
        data["steps"]["reply"]["when"] = when
    text = yaml.safe_dump(data, sort_keys=False).replace("  reply:\n", extra_yaml + "  reply:\n")
    spec.write_text(text, encoding="utf-8")
    return spec


def line_of(spec, needle: str) -> int:
    return next(i for i, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


def assert_refused_everywhere(cli, workdir, fake, spec, expected: str):
    for command in (["validate", spec], ["plan", spec], ["apply", spec, "--yes"]):
        result = cli(workdir, *command)
        assert result.returncode == 1, (command, result.stderr)
        assert "error [template_undefined]" in result.stderr or "[template_undefined]" in result.stderr
        assert expected in result.stderr, result.stderr
    assert fake.stats()["requests"] == 0  # nothing paid for, not even the first step
    assert not (workdir / "out" / "results.csv").exists()


def test_misspelt_field_of_an_earlier_step(workdir, fake, batchor_cli):
    spec = two_step_spec(workdir, "Reply to a {{ classify.sentimnt }} review")
    where = f"{spec}:{line_of(spec, 'classify.sentimnt')}: steps.reply.prompt"
    assert_refused_everywhere(
        batchor_cli,
        workdir,
        fake,
        spec,
        f"{where}: `classify.sentimnt`: step 'classify' outputs no field 'sentimnt' (did you mean 'sentiment'?)",
    )


def test_a_text_step_exposes_only_its_text(workdir, fake, batchor_cli):
    spec = two_step_spec(workdir, "Reply using {{ summary.text }}")
    assert_refused_everywhere(
        batchor_cli, workdir, fake, spec, "`summary.text`: step 'summary' is a text step; its answer is only its text"
    )
    ok = two_step_spec(workdir, "Reply using {{ summary }} ({{ summary.strip() }}) {{ classify.score }}")
    assert batchor_cli(workdir, "validate", ok).returncode == 0


def test_when_expression_is_checked(workdir, fake, batchor_cli):
    spec = two_step_spec(workdir, "Reply to {{ row.text }}", when="classify.scor > 3")
    assert_refused_everywhere(
        batchor_cli,
        workdir,
        fake,
        spec,
        "steps.reply.when: `classify.scor`: step 'classify' outputs no field 'scor' (did you mean 'score'?)",
    )


def test_input_column_gets_a_suggestion_and_its_line(workdir, fake, batchor_cli):
    spec = two_step_spec(workdir, "Reply to {{ row.txt }}")
    assert_refused_everywhere(
        batchor_cli,
        workdir,
        fake,
        spec,
        f"{spec}:{line_of(spec, 'row.txt')}: steps.reply.prompt: "
        "`row.txt`: the input has no column 'txt' (did you mean 'text'?)",
    )


def test_sql_step_columns_and_struct_fields_are_checked(workdir, fake, batchor_cli):
    route = (
        "  route:\n    sql: |\n      SELECT _row_key, classify.sentiment AS mood\n"
        "      FROM rows WHERE classify.scroe > 1\n"
    )
    spec = two_step_spec(workdir, "Reply in a {{ route.mod }} tone", extra_yaml=route)
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert f"{spec}:{line_of(spec, 'classify.scroe')}: steps.route.sql" in result.stderr
    assert 'Could not find key "scroe"' in result.stderr and '"score"' in result.stderr
    # once the query is fixed, the columns it returns are what later templates may read
    fixed = spec.read_text(encoding="utf-8").replace("classify.scroe", "classify.score")
    spec.write_text(fixed, encoding="utf-8")
    assert_refused_everywhere(
        batchor_cli, workdir, fake, spec, "`route.mod`: step 'route' returns no field 'mod' (did you mean 'mood'?)"
    )


def test_nested_fields_follow_the_schema(workdir, fake, batchor_cli):
    nested = {
        "type": "object",
        "required": ["who"],
        "additionalProperties": False,
        "properties": {
            "who": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": {"type": "string"}},
            },
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    spec = make_spec(workdir, rows=2, schema=nested)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["steps"]["reply"] = {"prompt": "Hi {{ classify.who.nmae }} {{ classify.tags[0] }}", "output": "text"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert "`classify.who.nmae`: step 'classify' outputs no field 'nmae' (did you mean 'name'?)" in result.stderr
    assert SENTIMENT_SCHEMA  # the default schema stays untouched
