"""A batch that failed as a whole, by provider. OpenAI's `failed` is a validation failure of the
input file before any request ran; Gemini's BATCH_STATE_FAILED carries a google.rpc.Status on its
operation; Anthropic has no failed batch, only requests that each `errored`. Nothing ran, so
nothing is billed. Where the provider refused the requests (OpenAI's validation, Gemini's
INVALID_ARGUMENT, Anthropic's invalid_request_error) the rows fail at once; where it failed inside
(Gemini INTERNAL, Anthropic api_error) they go in the next batch, up to `max_attempts`."""

from __future__ import annotations

import pytest

from batchor import api
from tests.engine.batch_helpers import results, state_rows, switch_after_first_collect
from tests.engine.test_batch_providers import MODELS, aws_at_the_fake, spec_for  # noqa: F401 - autouse fixture


# Not Bedrock yet: its fake (tests/fakes/bedrock_batch_routes.py) models neither a missing batch
# API nor a job that fails as a whole.
@pytest.mark.parametrize("provider", [p for p in MODELS if p != "bedrock"])
def test_a_batch_the_provider_refused_fails_its_rows_once_at_no_cost(fake, workdir, provider):
    fake.configure(batch_end="failed", batch_fail_code="invalid_request")
    spec = spec_for(workdir, provider, rows=3)  # max_attempts 3
    outcome = api.apply(str(spec))
    assert (outcome.status, outcome.failed) == ("failed", 3)
    assert fake.stats()["batches_created"] == 1  # the same requests would be refused again
    assert {(status, code, attempts) for status, code, attempts in results(workdir).values()} == {
        ("failed", "invalid_request", 1)
    }
    assert state_rows(workdir, "SELECT sum(cost_usd) FROM attempts") == [(0.0,)] and outcome.cost_usd == 0


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_batch_that_failed_inside_the_provider_is_sent_again(fake, workdir, provider):
    fake.configure(batch_end="failed", batch_fail_code="server_error")
    spec = spec_for(workdir, provider, rows=3)
    outcome = api.apply(str(spec), on_event=switch_after_first_collect(fake, batch_end="completed"))
    assert (outcome.status, outcome.succeeded) == ("succeeded", 3)
    assert fake.stats()["batches_created"] == 2
    assert {attempts for _, _, attempts in results(workdir).values()} == {2}  # the failed batch used one
