"""The endpoint is part of a request's identity: another base URL (a local server, a gateway alias)
never shares the official endpoint's cache, while the official endpoint, written out or not,
keeps the keys batchor gave before endpoints counted (pinned below), so existing caches stay valid."""

from __future__ import annotations

import pytest
from conftest import make_spec

from batchor import api
from batchor.errors import StalePlanError
from batchor.plan.endpoint import normalise_url, step_endpoint

BASE_URL_VARS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
# Key of row r0 of `make_spec(rows=2)` per provider, computed by batchor before this change.
PINNED = {
    ("openai", "gpt-4.1-mini"): "cdb84043cec6c15d1b2372b8eb8fc029",
    ("anthropic", "claude-sonnet-4-5"): "0b04b7744038c7abb9e4682d40c0ca96",
    ("gemini", "gemini-2.5-flash"): "d6318a2c268f06fc112aefa57f1f6ac2",
}
OFFICIAL_WRITTEN_OUT = {
    "openai": ["https://api.openai.com/v1", "HTTPS://API.OPENAI.COM:443/v1/"],
    "anthropic": ["https://api.anthropic.com", "https://api.anthropic.com/"],
    "gemini": ["https://generativelanguage.googleapis.com/"],
}


@pytest.fixture
def no_base_url_env(monkeypatch):
    for name in BASE_URL_VARS:
        monkeypatch.delenv(name, raising=False)


def _first_key(folder, provider: str, model: str, **model_changes) -> str:
    spec = make_spec(folder, rows=2, provider=provider, model=model)
    if model_changes:
        text = spec.read_text()
        extra = "".join(f"\n  {k}: {v}" for k, v in model_changes.items())
        spec.write_text(text.replace(f"  name: {model}", f"  name: {model}{extra}", 1))
    plan = api.plan(str(spec), state=str(folder / "state.duckdb"))
    batch = next(plan.iter_batches(["_row_key", "__req.classify.key"]))
    assert batch.column(0).to_pylist()[0] == "r0"
    return batch.column(1).to_pylist()[0]


@pytest.mark.parametrize(("provider", "model"), list(PINNED))
def test_official_endpoint_keeps_the_keys_of_earlier_versions(tmp_path, no_base_url_env, provider, model):
    assert _first_key(tmp_path / "default", provider, model) == PINNED[(provider, model)]
    for i, url in enumerate(OFFICIAL_WRITTEN_OUT[provider]):
        assert _first_key(tmp_path / f"explicit{i}", provider, model, base_url=url) == PINNED[(provider, model)]


def test_another_base_url_is_another_request(tmp_path, no_base_url_env, monkeypatch):
    official = PINNED[("openai", "gpt-4.1-mini")]
    local = _first_key(tmp_path / "a", "openai", "gpt-4.1-mini", base_url="http://127.0.0.1:8000/v1")
    gateway = _first_key(tmp_path / "b", "openai", "gpt-4.1-mini", base_url="https://gw.example.com/v1")
    assert len({official, local, gateway}) == 3
    same = _first_key(tmp_path / "c", "openai", "gpt-4.1-mini", base_url="http://127.0.0.1:8000/v1/")
    assert same == local  # normalised: a trailing slash is the same endpoint
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")  # as the SDK would read it
    assert _first_key(tmp_path / "d", "openai", "gpt-4.1-mini") == local
    gemini = PINNED[("gemini", "gemini-2.5-flash")]
    via_gateway = _first_key(tmp_path / "e", "gemini", "gemini-2.5-flash", base_url="https://gw.example.com")
    versioned = _first_key(
        tmp_path / "f",
        "gemini",
        "gemini-2.5-flash",
        base_url="https://gw.example.com",
        options="{api_version: v1alpha}",
    )
    assert len({gemini, via_gateway, versioned}) == 3


def test_a_local_server_never_feeds_the_official_cache(fake, workdir):
    spec = make_spec(workdir, rows=5)  # the `fake` fixture points OPENAI_BASE_URL at the fake
    assert api.apply(str(spec), max_cost=1).succeeded == 5
    alias = fake.openai_base_url.replace("127.0.0.1", "localhost")
    assert api.plan(str(spec)).to_run == 0  # same endpoint: answered from the cache
    spec.write_text(spec.read_text().replace("  name: gpt-4.1-mini", f"  name: gpt-4.1-mini\n  base_url: {alias}"))
    assert api.plan(str(spec)).to_run == 5  # another endpoint under the same model name: not cached


def test_a_saved_plan_is_refused_when_the_base_url_variable_moved(fake, workdir, monkeypatch):
    spec = make_spec(workdir, rows=3)
    api.plan(str(spec)).save(workdir / "job.plan")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.example.com/v1")
    with pytest.raises(StalePlanError, match="OPENAI_BASE_URL"):
        api.apply(str(workdir / "job.plan"), max_cost=1)
    assert fake.stats()["requests"] == 0


def test_credentials_in_a_base_url_stay_out_of_the_identity():
    url = "https://user:pw-secret@GW.example.com:8443/v1/?api-version=2024-10-21&key=qs-secret"
    assert normalise_url(url) == "https://gw.example.com:8443/v1?api-version=2024-10-21"
    endpoint = step_endpoint("openai-compatible", url, {}, env={})
    assert endpoint is not None and "secret" not in endpoint
    assert step_endpoint("openai", None, {}, env={}) is None
    assert step_endpoint("groq", None, {}, env={}) == "https://api.groq.com/openai/v1"  # its preset
