"""Azure OpenAI through the openai SDK's Azure client against the fake's Azure URLs: realtime and
batch, API key and Entra ID token, api-version from the spec, deployments priced as their model.
(Kill -9 after create, a create answered late, expiry and every batch call's faults run for Azure
in tests/engine/test_batch_providers.py and test_batch_fault_matrix.py.)"""

from __future__ import annotations

import json

import pytest
import yaml

from batchor import api
from batchor.errors import BaseUrlMissingError, NoApiKeyError, UnknownModelError
from batchor.plan.prices import lookup_price
from batchor.providers.azure.batch import AzureBatchProvider
from tests.providers.batch_cases import requests, round_trip, run
from tests.providers.helpers import provider_spec

KEY = "azure-test-secret-123456"
TOKEN = "entra-token-secret-987654"


def azure_spec(folder, name="prod-mini", rows=4, **options):
    options = {"model": "gpt-4.1-mini", **options}
    return provider_spec(folder, "azure", name, rows=rows, options=options)


def secrets_left(folder, *secrets):
    """Files under `folder` (state, plans, outputs) holding any of `secrets`."""
    return [p for p in folder.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in secrets)]


def test_realtime_sends_the_deployment_with_the_specs_api_version(fake, workdir):
    spec = azure_spec(workdir, api_version="2025-01-01-preview")
    outcome = api.apply(str(spec))
    assert outcome.succeeded == 4
    stats = fake.stats()
    assert stats["azure"] == {"api_key|2025-01-01-preview": 4}
    body = stats["bodies"][0]
    assert body["model"] == "prod-mini" and "max_tokens" in body and "prompt_cache_key" not in body
    assert secrets_left(workdir, KEY) == []


def test_a_deployment_is_priced_as_the_model_it_serves(fake, workdir):
    plan = api.plan(azure_spec(workdir), save=False)
    step = plan.header.steps[0]
    expected = lookup_price("openai", "gpt-4.1-mini")
    assert step.price is not None and expected is not None
    assert step.price["input_per_mtok"] == expected.input_per_mtok and step.token_count_exact


def test_a_deployment_without_its_model_says_how_to_name_it(fake, workdir):
    spec = provider_spec(workdir, "azure", "prod-mini")
    with pytest.raises(UnknownModelError) as caught:
        api.validate(spec)
    assert "options: {model:" in (caught.value.hint or "")


def test_entra_id_sends_the_token_not_the_key(fake, workdir, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", TOKEN)
    outcome = api.apply(str(azure_spec(workdir, auth="entra_id")))
    assert outcome.succeeded == 4
    assert fake.stats()["azure"] == {"entra_id|2024-10-21": 4}
    assert secrets_left(workdir, TOKEN, KEY) == []


def test_entra_id_without_a_token_names_its_variable(fake, workdir, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    assert api.required_keys([azure_spec(workdir, auth="entra_id")])[0].envs == ("AZURE_OPENAI_AD_TOKEN",)
    with pytest.raises(NoApiKeyError, match="AZURE_OPENAI_AD_TOKEN"):
        run("azure", lambda client: None, auth="entra_id", model="gpt-4.1-mini")


def test_no_endpoint_is_a_coded_error_naming_the_variable(fake, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    with pytest.raises(BaseUrlMissingError, match="endpoint"):
        run("azure", lambda client: None)


def test_batch_lines_use_azures_endpoint_and_the_deployment():
    [request] = requests("prod-mini", 1)
    line = json.loads(AzureBatchProvider(None, api="chat", strict=True, secret=None).encode(request))
    assert line["url"] == "/chat/completions" and line["body"]["model"] == "prod-mini"
    assert line["body"]["max_tokens"] == 40 and "prompt_cache_key" not in line["body"]


def test_batch_round_trip_through_the_sdk(fake):
    fake.reset(batches=True)

    async def scenario(client):
        return await round_trip(client, "prod-mini", 3)

    remote, rows = run("azure", scenario, api_version="2024-10-21")
    assert remote.state == "completed" and len(rows) == 3 and all(r.completion for r in rows.values())
    calls = fake.stats()["endpoint_calls"]
    assert calls["azure.files.create"] == 1 and calls["azure.batches.create"] == 1


def test_batch_apply_deletes_the_files_and_stores_no_secret(fake, workdir):
    fake.reset(batches=True)
    spec = azure_spec(workdir, rows=5)
    data = yaml.safe_load(spec.read_text())
    data["limits"].update(mode="batch", batch_poll_s=0.01, batch_poll_max_s=0.05)
    spec.write_text(yaml.safe_dump(data))
    outcome = api.apply(str(spec))
    assert outcome.succeeded == 5
    stats = fake.stats()
    assert stats["batches_created"] == 1 and stats["files"] == []
    assert set(stats["azure"]) == {"api_key|2024-10-21"}
    assert secrets_left(workdir, KEY) == []


def test_a_call_without_api_version_is_refused_by_the_fake(fake):
    """The fake's Azure URLs answer as Azure does without api-version: the test above proves the
    SDK sends it, this one that the fake would notice if it did not."""
    import urllib.request

    request = urllib.request.Request(f"{fake.url}/openai/batches", headers={"api-key": "k"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5)
    assert caught.value.code == 404


def test_plan_shows_the_azure_endpoint_and_its_key_variable(fake, workdir):
    plan = api.plan(azure_spec(workdir), save=False)
    step = plan.header.steps[0]
    assert step.endpoint is not None and step.endpoint.startswith(fake.url)
    assert step.api_key_env == "AZURE_OPENAI_API_KEY"
