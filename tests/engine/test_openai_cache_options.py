"""OpenAI's prompt-cache options from GPT-5.6 (`prompt_cache_options`, `prompt_cache_breakpoint`
in the openai SDK's types) end to end against the fake over HTTP: the request marks where the
step's shared prefix ends and turns the implicit breakpoint off, a miss writes the prefix (billed
1.25x input in the price table), a hit reads it, and the ledger equals the fake's bill; the
deprecated `prompt_cache_retention` is not sent to those models."""

from __future__ import annotations

import pytest
import yaml

from batchor import api
from batchor.plan.prompt_cache import cache_tokens
from tests.engine.test_prompt_cache import cached_spec, ledger
from tests.fakes.bill import fake_bill


def gpt56_spec(workdir, ttl=None):
    spec = cached_spec(workdir, "openai", rows=8)
    data = yaml.safe_load(spec.read_text())
    data["model"]["name"] = "gpt-5.6"
    data["model"]["params"].pop("temperature", None)
    if ttl:
        data["cache"] = {"ttl": ttl}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def test_gpt_5_6_marks_the_shared_prefix_and_pays_its_writes_as_billed(workdir, fake):
    spec = gpt56_spec(workdir, ttl="24h")
    step = api.plan(spec, save=False).header.steps[0]
    assert step.prompt_cache is not None and step.prompt_cache.writes  # the plan prices the misses' writes
    reads, writes = cache_tokens(step, 8)
    assert reads > 0 and writes >= step.prompt_cache.tokens
    assert api.apply(spec, handle_signals=False).succeeded == 8
    body = fake.stats()["bodies"][0]
    assert body["prompt_cache_options"] == {"mode": "explicit"} and "prompt_cache_retention" not in body
    head = body["messages"][1]["content"]  # after the system prompt: the prompt's literal head, marked
    assert head[0] == {
        "type": "text",
        "text": "Label this review.\n\nReview: ",
        "prompt_cache_breakpoint": {"mode": "explicit"},
    }
    read, write, spent, _ = ledger(workdir)
    stats = fake.stats()
    assert write == stats["cache_write_tokens"] > 0 and read == stats["cache_read_tokens"] > 0
    assert spent == pytest.approx(fake_bill(stats), rel=1e-9)


def test_older_models_keep_the_retention_and_no_breakpoint(workdir, fake):
    spec = cached_spec(workdir, "openai", rows=2)
    data = yaml.safe_load(spec.read_text())
    data["model"]["name"], data["cache"] = "gpt-4.1", {"ttl": "24h"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert api.apply(spec, handle_signals=False).succeeded == 2
    body = fake.stats()["bodies"][0]
    assert body["prompt_cache_retention"] == "24h" and "prompt_cache_options" not in body
    assert isinstance(body["messages"][1]["content"], str)


def test_the_responses_api_leaves_the_breakpoint_to_openai(workdir, fake):
    """Its system prompt is `instructions`, which takes no breakpoint: explicit mode would cache nothing."""
    spec = gpt56_spec(workdir)
    data = yaml.safe_load(spec.read_text())
    data["model"]["api"] = "responses"
    data["steps"]["classify"]["system"] = "Be brief."
    data["steps"]["classify"]["prompt"] = data["steps"]["classify"]["prompt"].replace("Label", "Label this. " * 600, 1)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert api.apply(spec, handle_signals=False).succeeded == 8
    body = fake.stats()["bodies"][0]
    assert body["prompt_cache_key"] and "prompt_cache_options" not in body
