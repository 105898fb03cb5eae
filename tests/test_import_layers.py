"""Imports follow the data flow: spec -> plan -> outputs/engine -> api -> cli, over a foundation.

A module may import its own package, a package of a lower layer, or (in the foundation and the
application layers only) a package of its own layer. Nothing imports `cli`; providers, state and
spec never import each other, the planner or the engine. A new top-level module or package must
be given a layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "batchor"

LAYERS: dict[str, int] = {
    # 0 foundation: no knowledge of any stage
    "errors": 0,
    "version": 0,
    "fingerprint": 0,
    "file_modes": 0,
    "duck": 0,
    "arrow_pool": 0,
    "schema": 0,
    "humanize": 0,
    "lazy": 0,
    "sigint": 0,
    # 1 what the stages stand on: the spec model, the state, the provider seam, frame adapters
    "spec": 1,
    "state": 1,
    "providers": 1,
    "frames": 1,
    # 2 compile a spec into a plan
    "plan": 2,
    # 3 write a plan's results out
    "outputs": 3,
    # 4 run a plan
    "engine": 4,
    # 5 application: what the CLI and Python users call
    "api": 5,
    "operations": 5,
    "report": 5,
    "result": 5,
    "quality": 5,
    "scaffold": 5,
    "__init__": 5,
    "pilot": 5,
    "draft": 5,
    # 6 the command line: imported by nothing
    "cli": 6,
}
SAME_LAYER_OK = {0, 5}


def _top(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, batchor.x.y) for every import of batchor in the file, `from batchor import x` as batchor.x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "batchor"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "batchor":
                found += [(node.lineno, f"batchor.{a.name}") for a in node.names]
            elif node.module.startswith("batchor."):
                found.append((node.lineno, node.module))
    return found


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts)


def test_every_module_has_a_layer():
    tops = {_top(_module_of(p)) for p in PACKAGE.rglob("*.py")}
    missing = sorted(tops - set(LAYERS))
    assert not missing, f"give these a layer in tests/test_import_layers.py: {missing}"


def test_imports_follow_the_layers():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _top(_module_of(path))
        for line, target_module in _imports(path):
            target = _top(target_module)
            if target == source or target not in LAYERS or source not in LAYERS:
                continue
            mine, theirs = LAYERS[source], LAYERS[target]
            if theirs < mine or (theirs == mine and mine in SAME_LAYER_OK):
                continue
            wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target_module}")
    assert not wrong, "imports against the flow:\n" + "\n".join(wrong)


def test_the_check_sees_a_backward_import(tmp_path):
    """The scan itself works: a planner module importing the engine is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from batchor.engine.run import apply_plan\nfrom batchor import cli\n", encoding="utf-8")
    assert [t for _, t in _imports(bad)] == ["batchor.engine.run", "batchor.cli"]
    assert LAYERS["engine"] > LAYERS["plan"] and LAYERS["cli"] == max(LAYERS.values())


def test_duckdb_is_first_imported_only_through_batchor_duck():
    """A Ctrl+C during DuckDB's first import aborts the process unless batchor.duck holds it back
    (batchor/sigint.py): a module importing duckdb itself could be the first to load it."""
    direct = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(name.split(".")[0] in ("duckdb", "_duckdb") for name in names):
                direct.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    elsewhere = [where for where in direct if not where.startswith("batchor/duck.py:")]
    assert direct and not elsewhere, f"import DuckDB with `from batchor.duck import duckdb`: {elsewhere}"
