"""The reference pages in docs/reference/ are generated from the code (scripts/gen_docs.py): the
committed pages must be what the generator writes now, so they cannot drift from the CLI, the spec
schema, the error tree, the Python API or the output columns."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_docs", module)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_pages_are_what_the_generator_writes():
    pages = _generator().render_all()
    stale = [name for name, text in pages.items() if (ROOT / "docs" / "reference" / name).read_text() != text]
    assert not stale, f"stale: {stale}; run `python scripts/gen_docs.py` and commit docs/reference/"


def test_every_error_code_has_a_fix_on_the_errors_page():
    gen = _generator()
    codes = [cls.code for cls in gen.error_classes()]
    missing = [code for code in codes if not gen.FIXES.get(code)]
    assert not missing, f"add a fix for {missing} to scripts/docs_errors.py, then run `python scripts/gen_docs.py`"
    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    assert all(f"| `{code}` |" in page for code in codes)
    import batchor.errors as errors

    exits = [name for name, value in vars(errors).items() if name.startswith("EXIT_") and isinstance(value, int)]
    assert [name for name in exits if name not in gen.EXIT_MEANINGS] == [], "say what it means in EXIT_MEANINGS"


def test_every_command_and_subcommand_has_its_help_on_the_cli_page():
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("apply", "plan", "validate", "state migrate", "state check", "spec-schema", "init"):
        assert f"`batchor {command}`" in page
    assert "Usage: batchor apply [OPTIONS]" in page and "\x1b[" not in page  # no colours


def test_every_spec_key_of_the_schema_is_on_the_spec_keys_page():
    import json

    schema = json.loads((ROOT / "schemas" / "batchor-spec.schema.json").read_text())
    page = (ROOT / "docs" / "reference" / "spec-keys.md").read_text()
    parts = [schema, *schema["$defs"].values()]
    keys = {key for part in parts for key in part.get("properties", {})}
    assert keys and all(f"| `{key}` |" in page for key in keys)
