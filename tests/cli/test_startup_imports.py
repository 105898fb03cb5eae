"""`batchor --help` stays fast: importing the CLI loads neither a provider SDK nor the engine,
the state (DuckDB, pyarrow) or the quality checks; commands load what they use on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import make_spec

HEAVY = (
    "openai",
    "anthropic",
    "google.genai",
    "aiohttp",
    "httpx",
    "duckdb",
    "pyarrow",
    "numpy",
    "pandas",
    "jsonschema",
    "jinja2",
    "batchor.engine.run",
    "batchor.state.duckdb_store",
    "batchor.quality.checks",
)
# What `batchor --help` must not load either: the spec and plan models (pydantic builds them at import),
# asyncio, and rich's markdown renderer (typer's rich help pulls it in).
HELP_HEAVY = (*HEAVY, "batchor.spec.model", "batchor.plan.summary", "asyncio", "rich.markdown", "typer.rich_utils")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_importing_the_cli_loads_no_sdk_engine_or_state():
    modules = loaded_after("import batchor.cli.main")
    assert not [name for name in HEAVY if name in modules]


@pytest.mark.parametrize("args", [["--help"], ["apply", "--help"], ["plan", "--help"], ["show", "--help"]])
def test_help_loads_neither_the_models_nor_asyncio_nor_rich_markdown(args):
    code = f"from batchor.cli.main import run\ntry:\n    run({args!r})\nexcept SystemExit as e:\n    assert e.code == 0"
    modules = loaded_after(code)
    assert "batchor.cli.main" in modules
    assert not [name for name in HELP_HEAVY if name in modules]


def test_import_batchor_is_light_and_its_api_loads_on_use():
    modules = loaded_after("import batchor")
    assert not [name for name in HEAVY if name in modules]
    modules = loaded_after("import batchor\nbatchor.apply, batchor.plan, batchor.Result")
    assert "batchor.engine.run" in modules and "openai" not in modules


def test_batchor_plan_is_the_function_after_its_package_loads():
    import batchor
    import batchor.plan.compile  # would rebind `batchor.plan` to the package

    assert callable(batchor.plan) and batchor.plan.__module__ == "batchor"


def applied_modules(folder, spec) -> set[str]:
    """The modules a real `batchor apply SPEC` process had loaded when it finished (it must succeed)."""
    code = (
        f"from batchor.cli.main import run\ntry:\n    run(['apply', {str(spec)!r}, '--yes', '--json'])\n"
        "except SystemExit as e:\n    assert not e.code, e.code"
    )
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


PLAIN_HTTP = ("openai", "anthropic", "gemini")  # realtime requests without the SDK (providers/http_post.py)
SDKS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google.genai", "mock": None}
MODELS = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "gemini": "gemini-2.0-flash",
    "mock": "gpt-4.1-mini",
}


@pytest.mark.parametrize(
    "provider", ["openai", *(pytest.param(p, marks=pytest.mark.slow) for p in ("anthropic", "gemini", "mock"))]
)
@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_apply_loads_only_the_sdk_its_spec_uses(fake, workdir, provider):
    """Start-up of `apply` pays for no SDK but its spec's provider's (the OpenAI SDK alone costs
    about 0.7 s of CPU), none at all where realtime requests go over plain HTTP (the default for
    OpenAI and Anthropic), and `--json` for no live view (rich and the report package)."""
    modules = applied_modules(workdir, make_spec(workdir, rows=3, provider=provider, model=MODELS[provider]))
    assert "batchor.engine.run" in modules
    if provider in PLAIN_HTTP:
        assert SDKS[provider] not in modules
    assert not [sdk for sdk in SDKS.values() if sdk not in (None, SDKS[provider]) and sdk in modules]
    assert not {"rich.console", "batchor.report.live"} & modules  # --json prints NDJSON: no live view
    assert "pandas" not in modules  # pyarrow's check for pandas objects is answered without it


def test_the_cli_keeps_pandas_out_yet_pyarrow_converts_to_pandas_when_asked():
    code = (
        "from batchor.cli import pandas_probe\npandas_probe.install()\nimport pyarrow as pa\n"
        "t = pa.table({'a': [1, 2]})\nprint('pandas' in sys.modules)\n"
        "print(t.to_pandas()['a'].tolist(), pa.array(t.to_pandas()['a']).to_pylist())"
    )
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}"], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["False", "[1, 2] [1, 2]"]
