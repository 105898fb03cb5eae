"""Imports follow the data flow: spec -> plan -> outputs/engine -> api -> cli, over a foundation.

A module may import its own package, a package of a lower layer, or (in the foundation and the
application layers only) a package of its own layer. Nothing imports `cli`; providers, state and
spec never import each other, the planner or the engine. A new top-level module or package must
be given a layer here.
"""

from __future__ import annotations

import ast
import re
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
    "resolve": 3,  # pairs a resolve job's rows before planning, clusters its judged pairs after
    # 4 run a plan
    "engine": 4,
    # 5 application: what the CLI and Python users call
    "api": 5,
    "operations": 5,
    "report": 5,
    "result": 5,
    "quality": 5,
    "review": 5,  # reads answers through quality, writes reviewed labels through the state
    "scaffold": 5,
    "__init__": 5,
    "pilot": 5,
    "costdiff": 5,
    "choose": 5,
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


# The state's tables (state/migrations.py, state/pg_migrations.py): SQL naming them belongs in
# batchor/state/ only; elsewhere a named StateStore read (state/reads.py) says what is asked.
STATE_TABLES = (
    "runs|attempts|job_requests|results|batches|batch_requests|run_steps|work_items|workers|rate_buckets|"
    "run_budgets|batchor_meta|batchor_migrations|job_requests_v|results_v"
)
_STATE_SQL = re.compile(rf"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+\"?(?:{STATE_TABLES})\b")


def _state_sql(path: Path) -> list[tuple[int, str]]:
    """(line, `FROM table`) where a string of the file (a literal, or a part of an f-string) is SQL
    naming a state table."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(node.lineno, m[0]) for m in _STATE_SQL.finditer(node.value)]
    return found


def test_only_the_state_names_its_tables_in_sql():
    outside = [p for p in sorted(PACKAGE.rglob("*.py")) if _module_of(p).split(".")[1:2] != ["state"]]
    found = [f"{p.relative_to(PACKAGE.parent)}:{line}: {sql}" for p in outside for line, sql in _state_sql(p)]
    assert not found, "add a named read to StateStore (batchor/state/reads.py) for:\n" + "\n".join(found)


def test_the_state_sql_check_sees_a_query(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'store.execute("SELECT count(*) FROM attempts WHERE run_id = ?")\n'
        'store.execute(f"SELECT j.step FROM x j JOIN job_requests r ON {on}")\n'
        '"""Answers go into batches, runs are listed (prose, not SQL)."""\n'
        'db.execute("SELECT * FROM answers")\n',
        encoding="utf-8",
    )
    assert _state_sql(bad) == [(1, "FROM attempts"), (2, "JOIN job_requests")]


def _named_modules(path: Path) -> list[tuple[int, str]]:
    """The file's imports of batchor and the modules it defers by name (`Deferred("batchor.x")`)."""
    deferred = [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"batchor(\.\w+)+", node.value)
    ]
    return _imports(path) + deferred


def test_the_cli_reaches_the_core_only_through_the_application_layer():
    """The CLI parses, calls one public function (api, operations, the pilot's face...) and prints:
    it never imports the planner, the engine or the state itself."""
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for path in sorted((PACKAGE / "cli").rglob("*.py"))
        for line, target in _named_modules(path)
        if _top(target) in ("plan", "state", "engine")
    ]
    assert not wrong, "call a function of batchor.api or batchor.operations instead:\n" + "\n".join(wrong)
