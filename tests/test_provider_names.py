"""Planning knows a provider only through its facts (`providers/<name>/facts.py`, read with
`provider_facts(name)`) and its registry entry: no module under `batchor/plan/` compares a
provider with its name, so adding a provider is one folder and one registry entry."""

from __future__ import annotations

import ast
from pathlib import Path

from batchor.providers import REGISTRY

PLAN = Path(__file__).resolve().parents[1] / "batchor" / "plan"
NAMES = frozenset(REGISTRY) | {"vertex", "vertexai"}


def _is_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_name(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value in NAMES


def _name_checks(path: Path) -> list[int]:
    """Lines comparing anything with a provider's name (`==`, `!=`, `in`, `not in`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(_is_name(side) for side in (node.left, *node.comparators))
    ]


def test_planning_never_compares_a_provider_name():
    found = [
        f"{p.relative_to(PLAN.parent.parent)}:{line}" for p in sorted(PLAN.rglob("*.py")) for line in _name_checks(p)
    ]
    assert not found, "give the provider a fact (providers/facts.py) instead of naming it:\n" + "\n".join(found)


def test_the_check_sees_a_name_comparison(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'if provider == "openai":\n    pass\n'
        'x = step.provider != "gemini"\n'
        'y = info.name in ("mock", "vllm")\n'
        'z = "azure" == model.provider\n'
        'ok = provider == MOCK or source == "local"\n',
        encoding="utf-8",
    )
    assert _name_checks(bad) == [1, 3, 4, 5]
