"""Templates run sandboxed; row data is data, never a template; files are owner-only."""

from __future__ import annotations

import os
import stat

import pyarrow.parquet as pq
import pytest

import batchor
from batchor.errors import TemplateError, TemplateUndefinedError

INJECTIONS = [
    "{{ 7*7 }}",
    "{{ row.__class__.__mro__ }}",
    "{% for x in ().__class__.__base__.__subclasses__() %}{{ x }}{% endfor %}",
    "{{ config }}",
    "${HOME}",
    "{{ lipsum.__globals__.os.popen('id').read() }}",
]


def _spec(prompt: str, **model: object) -> dict:
    return {
        "name": "sec",
        "input": {"path": "unused.csv"},
        "model": {"provider": "mock", "name": "m", **model},
        "steps": {"echo": {"prompt": prompt}},
        "output": {"path": "out.parquet"},
    }


def test_row_data_containing_template_syntax_is_rendered_as_text(workdir):
    import pandas as pd

    frame = pd.DataFrame({"text": INJECTIONS})
    plan = batchor.plan(_spec("Say: {{ row.text }}"), frame)
    rows = list(plan.iter_batches(["__req.echo.messages"]))[0].column(0).to_pylist()
    for payload, body in zip(INJECTIONS, rows):
        import json

        assert json.loads(body)[-1]["content"] == f"Say: {payload}"  # literally, not evaluated


@pytest.mark.parametrize(
    "template",
    [
        "{{ row.__class__.__mro__[1].__subclasses__() }}",
        "{{ ().__class__.__base__.__subclasses__() }}",
        "{{ row.text.__class__.__init__.__globals__ }}",
    ],
)
def test_sandbox_blocks_python_internals_in_spec_templates(workdir, template):
    import pandas as pd

    with pytest.raises((TemplateUndefinedError, TemplateError)) as info:
        batchor.plan(_spec(template), pd.DataFrame({"text": ["x"]}))
    assert "echo" in str(info.value)


def test_templates_cannot_read_environment_or_files(workdir, monkeypatch):
    import pandas as pd

    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t-value")
    for template in ("{{ environ }}", "{{ os.environ }}", "{% include '/etc/passwd' %}"):
        with pytest.raises((TemplateUndefinedError, TemplateError)):
            batchor.plan(_spec(template), pd.DataFrame({"text": ["x"]}))


def test_plan_and_state_files_are_owner_only(workdir):
    import pandas as pd

    result = batchor.apply(_spec("{{ row.text }}"), pd.DataFrame({"text": ["a", "b"]}))
    assert result.status == "succeeded"
    state_dir = workdir / ".batchor"
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state_dir / "state.duckdb").st_mode) == 0o600
    plans = list((state_dir / "plans").glob("*.plan"))
    assert plans and all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in plans)
    assert pq.read_table(result.output_path).num_rows == 2  # API data writes beside the spec's output
