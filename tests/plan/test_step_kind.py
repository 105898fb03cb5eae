"""The step kind is a type (plan/step_kind.py): code asks `step.step_kind` / `step.local`, and only
that module knows that a plan file writes a local step as the pseudo-provider `sql`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from batchor import api
from batchor.plan.step_kind import SQL_PROVIDER, StepKind, kind_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "batchor"
HOME = PACKAGE / "plan" / "step_kind.py"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("long_document_summary.yaml", {"chunks": StepKind.SPLIT, "notes": StepKind.LLM, "summary": StepKind.REDUCE}),
        ("review_duplicates.yaml", {"vec": StepKind.EMBED, "near": StepKind.SQL}),
    ],
)
def test_planned_steps_carry_their_kind(workdir, spec, expected):
    plan = api.plan(str(ROOT / "specs" / spec), save=False)
    kinds = {s.name: s.step_kind for s in plan.header.steps if s.name in expected}
    assert kinds == expected
    assert {s.name for s in plan.header.steps if s.local} == {n for n, k in expected.items() if k.local}
    for step in plan.header.steps:  # the plan file's form is unchanged: local steps name the `sql` provider
        assert (step.provider == SQL_PROVIDER) == step.local


def test_kind_of_reads_the_plan_files_form():
    assert kind_of("sql", "llm") is StepKind.SQL and kind_of("sql", "split") is StepKind.SPLIT
    assert kind_of("openai", "embed") is StepKind.EMBED and kind_of("anthropic", "llm") is StepKind.LLM


def _sql_provider_checks(path: Path) -> list[int]:
    """Lines comparing a `provider` with the literal "sql", or writing `provider="sql"`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = any(isinstance(s, ast.Attribute) and s.attr == "provider" or _named(s, "provider") for s in sides)
            if names and any(_is_sql(s) for s in sides):
                found.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "provider" and _is_sql(node.value):
            found.append(node.value.lineno)
    return found


def _named(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_sql(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_sql(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value == SQL_PROVIDER


def test_only_the_step_kind_module_knows_the_sql_pseudo_provider():
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != HOME
        for line in _sql_provider_checks(p)
    ]
    assert not found, 'ask step.step_kind or step.local instead of provider == "sql":\n' + "\n".join(found)


def test_the_check_sees_a_provider_comparison(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'if step.provider == "sql":\n    pass\n'
        'x = [s for s in steps if s.provider != "sql"]\n'
        'y = provider in ("mock", "sql")\n'
        'StepPlan(provider="sql")\n'
        'z = kind == "sql"\n',
        encoding="utf-8",
    )
    assert sorted(_sql_provider_checks(bad)) == [1, 3, 4, 5]  # not line 6: a kind, not a provider
