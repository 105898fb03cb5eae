"""An endpoint that takes connections and never answers, or answers the same 404 to every
request, stops the run with a coded reason naming it, its rows left pending: not every row tried
`max_attempts` times `request_timeout_s` long (or failed for what is not the row's fault)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from batchor import api
from tests.providers.helpers import provider_spec

PROVIDERS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}


def run(workdir: Path, provider: str, **model_block) -> tuple[api.Result, float]:
    spec = provider_spec(workdir, provider, PROVIDERS[provider], rows=40, **model_block)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["limits"].update(max_attempts=4, concurrency=2, request_timeout_s=0.5)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    started = time.monotonic()
    result = api.apply(spec, handle_signals=False)
    return result, time.monotonic() - started


def test_an_endpoint_that_never_answers_stops_the_run_naming_it(workdir, fake):
    fake.configure(timeout=1.0, timeout_hold_s=5.0)  # every request held, never answered in time
    result, elapsed = run(workdir, "openai")
    assert result.stop_reason is not None and result.stop_reason.startswith("endpoint_unresponsive: ")
    assert fake.openai_base_url in result.stop_reason
    assert result.succeeded == 0 and result.failed == 0  # its rows stay pending for the next apply
    assert fake.stats()["requests"] <= 10  # not 40 rows x 4 attempts
    assert elapsed < 30, elapsed


# Gemini's paths name the model (`models/NAME:generateContent`): a 404 there reads as an unknown
# model, which stops the run at the first one already.
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_endpoint_that_answers_404_to_everything_stops_the_run_naming_it(workdir, fake, provider):
    base = {"openai": fake.openai_base_url, "anthropic": fake.anthropic_base_url, "gemini": fake.gemini_base_url}
    wrong = base[provider] + "/not-here"  # every path under it is a 404
    result, _ = run(workdir, provider, base_url=wrong)
    assert result.stop_reason is not None and result.stop_reason.startswith("endpoint_not_found: "), result.stop_reason
    assert wrong.split("//", 1)[1] in result.stop_reason
    assert result.succeeded == 0 and result.failed <= 5  # the rest stay pending, not failed for a wrong URL
