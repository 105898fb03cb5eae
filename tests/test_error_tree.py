"""The error tree is the one source of error codes and exit codes."""

from __future__ import annotations

import ast
from pathlib import Path

import batchor.errors as errors

CLI = Path(errors.__file__).parent / "cli"


def _all_errors(root: type = errors.BatchorError) -> list[type]:
    found = [root]
    for sub in root.__subclasses__():
        found += _all_errors(sub)
    return found


def test_every_error_code_is_unique():
    by_code: dict[str, list[str]] = {}
    for cls in _all_errors():
        if cls.__module__ == errors.__name__:
            by_code.setdefault(cls.code, []).append(cls.__name__)
    repeated = {code: names for code, names in by_code.items() if len(names) > 1}
    assert not repeated, f"error codes shared by several classes: {repeated}"


def _exit_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls that set the process exit code: typer.Exit(..), sys.exit(..), SystemExit(..)."""
    names = {"Exit", "exit", "SystemExit"}
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) in names or getattr(node.func, "id", None) in names)
    ]


def test_cli_exit_codes_come_from_the_error_tree():
    literals = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in _exit_calls(tree):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                literals += [
                    f"{path.name}:{n.lineno}"
                    for n in ast.walk(arg)
                    if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool)
                ]
    assert not literals, f"exit codes written as numbers in cli/ (use errors.EXIT_*): {literals}"
    assert sorted(CLI.glob("*.py")), "the cli package moved: update this test"
