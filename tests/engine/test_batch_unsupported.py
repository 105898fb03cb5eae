"""Batch mode against a server without a Batch API (every batch and file endpoint answers 404):
one coded error that suggests `--mode realtime`, nothing failed, the rows left pending."""

from __future__ import annotations

import duckdb
import pytest

from batchor import api
from batchor.errors import BatchUnsupportedError
from tests.engine.test_batch_providers import MODELS, aws_at_the_fake, spec_for  # noqa: F401 - autouse fixture


# Not Bedrock yet: its fake (tests/fakes/bedrock_batch_routes.py) models neither a missing batch
# API nor a job that fails as a whole. Not Vertex AI: every project has batch prediction.
@pytest.mark.parametrize("provider", [p for p in MODELS if p not in ("bedrock", "vertex")])
def test_batch_mode_without_a_batch_api_says_to_run_realtime(fake, workdir, provider):
    fake.configure(batch_api=False)
    spec = spec_for(workdir, provider, rows=6)
    with pytest.raises(BatchUnsupportedError) as caught:
        api.apply(str(spec), handle_signals=False)
    assert caught.value.code == "batch_unsupported" and "--mode realtime" in (caught.value.hint or "")
    assert "has no Batch API" in caught.value.message
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM results WHERE status = 'failed'").fetchall() == [(0,)]

    fake.configure(batch_api=True)  # the rows were left pending: realtime answers them all
    done = api.apply(str(spec), handle_signals=False, limits={"mode": "realtime"})
    assert done.succeeded == 6
