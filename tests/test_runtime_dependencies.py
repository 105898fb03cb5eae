"""`pip install -e .` (no extras) must be enough to run batchor: the README's quickstart installs
only that. Every module batchor imports comes from the standard library or from the runtime
dependencies in pyproject.toml (and theirs); the optional extras (`excel`, `dataframes`, `s3`) may be
imported only inside the functions that need them. The test extra's packages (pytest, pandas,
numpy by way of pandas, ...) are on the test machine, so a stray import of one would pass every
other test and break the quickstart on a user's machine.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as metadata
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from packaging.requirements import Requirement

PACKAGE = Path(__file__).resolve().parents[1] / "batchor"
OPTIONAL_EXTRAS = ("excel", "dataframes", "s3", "bedrock", "gcs", "hf")


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _closure(extras: tuple[str, ...]) -> set[str]:
    """The distributions pyproject.toml's dependencies (and `extras` of it) need, theirs included."""
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] + [line for e in extras for line in project["optional-dependencies"][e]]
    found: set[str] = set()
    todo = [(req.name, tuple(req.extras)) for req in map(Requirement, lines)]
    while todo:
        name, wanted = todo.pop()
        if _normal(name) in found and not wanted:
            continue
        found.add(_normal(name))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            applies = req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *wanted))
            if applies and (_normal(req.name) not in found or req.extras):
                todo.append((req.name, tuple(req.extras)))
    return found


def _imports() -> list[tuple[str, str, bool]]:
    """(file:line, top-level module, imported at module level) for every absolute import that
    is not guarded by `except ImportError` (a fallback for another version of a dependency)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        guarded = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.Try) and _catches_import(node)
            for handler in node.handlers
            for inner in ast.walk(handler)
        }
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if names and id(node) not in guarded:
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                found += [(where, name.split(".")[0], id(node) in top_level) for name in names]
    return found


def _catches_import(node: ast.Try) -> bool:
    caught = [ast.unparse(h.type) for h in node.handlers if h.type is not None]
    return any("ImportError" in c or "ModuleNotFoundError" in c for c in caught)


@functools.cache
def _distributions_of(module: str) -> frozenset[str]:
    return frozenset(_normal(d) for d in _module_owners().get(module, []))


@functools.cache
def _module_owners() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()  # reads every installed distribution's file list: once


def test_every_import_is_a_runtime_dependency_or_a_lazy_optional_one():
    runtime = _closure(())
    optional = set().union(*(_closure((extra,)) for extra in OPTIONAL_EXTRAS)) - runtime
    wrong = []
    for where, module, at_module_level in _imports():
        if module in sys.stdlib_module_names or module in ("batchor", "__future__"):
            continue
        dists = _distributions_of(module)
        if dists & runtime:
            continue
        if dists & optional and not at_module_level:
            continue
        wrong.append(f"{where} imports {module} ({', '.join(sorted(dists)) or 'not installed'})")
    assert not wrong, (
        "imports that `pip install -e .` does not provide (add the package to "
        "pyproject's dependencies, or import it lazily from an optional extra):\n" + "\n".join(wrong)
    )


def test_the_check_sees_a_test_only_package():
    """numpy arrives with pandas (test and dataframes extras) but with no runtime dependency."""
    assert "numpy" not in _closure(())
    assert "numpy" in set().union(*(_closure((e,)) for e in OPTIONAL_EXTRAS))
