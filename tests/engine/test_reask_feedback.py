"""Re-ask with feedback: an answer that fails validation is asked again with the conversation
(the planned messages, the rejected answer as the assistant's turn, and a user turn naming the
field and the rule), realtime and batch, through each provider's real SDK against the fake, which
answers wrongly until it is told what was wrong. Attempts stay bounded, every attempt is paid and
recorded, the row keeps its request key (a second apply pays nothing), and the budget and the
plan's upper bound count the longer input of a re-ask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from batchor import api
from batchor.engine.recorder import ReaskPolicy, judge
from batchor.engine.types import StepRuntime, WorkItem
from batchor.errors import InvalidOutputError
from batchor.plan.prices import ModelPrice
from batchor.plan.summary import reask_upper
from batchor.providers.base import Completion, LLMRequest
from batchor.schema.feedback import FEEDBACK_MAX_BYTES, feedback_text, planned_messages, reask_messages
from batchor.state.raw import unpack
from tests.engine.batch_helpers import FAST
from tests.engine.test_truncation import query
from tests.providers.helpers import provider_spec

RATING = {
    "type": "object",
    "properties": {"rating_guess": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["rating_guess"],
    "additionalProperties": False,
}
OPENAI, RESPONSES = ("openai", "gpt-4.1-mini", None), ("openai", "gpt-4.1-mini", "responses")
ANTHROPIC, GEMINI = ("anthropic", "claude-haiku-4-5", None), ("gemini", "gemini-2.5-flash", None)
# Each API's re-ask messages are built by one adapter for realtime and batch: the default tier asks
# every API once and each mode twice; `slow` runs the rest of the matrix.
CASES = [
    (*OPENAI, "realtime"),
    (*RESPONSES, "batch"),
    (*ANTHROPIC, "batch"),
    (*GEMINI, "realtime"),
    *(
        pytest.param(*case, mode, marks=pytest.mark.slow)
        for case, mode in [(OPENAI, "batch"), (RESPONSES, "realtime"), (ANTHROPIC, "realtime"), (GEMINI, "batch")]
    ),
]


def reask_spec(folder: Path, provider: str, model: str, api_kind: str | None, mode: str, **limits: Any) -> Path:
    path = provider_spec(folder, provider, model, rows=4, **({"api": api_kind} if api_kind else {}))
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["limits"].update(FAST if mode == "batch" else {}, max_attempts=3, **limits)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def strings(value: Any) -> Iterator[str]:
    """Every string inside a parsed JSON body (where a provider puts the answer text varies)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_the_feedback_names_the_field_and_the_rule(workdir):
    completion = Completion(text='{"rating_guess": 42}')
    spec = provider_spec(workdir, "openai", "gpt-4.1-mini", rows=2, schema=RATING)
    plan = api.plan(spec, save=False).header.steps[0]
    with pytest.raises(InvalidOutputError) as caught:
        judge(plan, completion)
    request = LLMRequest(
        "k1",
        "gpt-4.1-mini",
        ({"role": "system", "content": "S"}, {"role": "user", "content": "U"}),
        {"max_tokens": 50},
        RATING,
    )
    retry = ReaskPolicy().next_request(request, caught.value, 50)
    assert retry is not None and retry.key == request.key and retry.params == request.params
    assert [m["role"] for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2]["content"] == '{"rating_guess": 42}'
    feedback = retry.messages[3]["content"]
    assert "`rating_guess`: 42 is greater than the maximum of 5" in feedback
    assert "Answer again with valid JSON matching the schema" in feedback


def test_a_second_reask_replaces_the_first_and_the_same_rejection_gives_the_same_request():
    planned = ({"role": "user", "content": "Q"},)
    first = reask_messages(planned, "bad 1", ["$.a: 1 is not of type 'string'"])
    second = reask_messages(first, "bad 2", ["not valid JSON: Expecting value (line 1, column 1)"])
    assert planned_messages(second) == planned and len(second) == 3
    assert second[1]["content"] == "bad 2"
    assert "the answer is not valid JSON" in second[2]["content"]
    assert reask_messages(first, "bad 2", ["x"]) == reask_messages(first, "bad 2", ["x"])


def test_the_feedback_is_capped_in_bytes():
    text = feedback_text([f"$.field{i}: {'é' * 400} is too long" for i in range(20)])
    assert len(text.encode()) <= FEEDBACK_MAX_BYTES
    assert "and 15 more" in text or text.count("\n") >= 2


@pytest.mark.parametrize(("provider", "model", "api_kind", "mode"), CASES)
def test_a_rejected_answer_is_asked_again_with_feedback(fake, workdir, provider, model, api_kind, mode):
    fake.configure(malformed_until_feedback=True)
    spec = reask_spec(workdir, provider, model, api_kind, mode)
    result = api.apply(spec, handle_signals=False)
    assert (result.status, result.succeeded, result.failed) == ("succeeded", 4, 0)
    assert set(query("SELECT attempts FROM results")) == {(2,)}
    rows = query("SELECT request_key, attempt, outcome, error, raw FROM attempts ORDER BY request_key, attempt")
    assert [(r[1], r[2]) for r in rows] == [(1, "invalid_output"), (2, "ok")] * 4
    reasks = fake.stats()["reasks"]
    assert len(reasks) == 4 and len({r["prompt"] for r in reasks}) == 4
    rejected = {r["rejected"] for r in reasks}
    for _, attempt, _, _, raw in rows:  # each rejected answer, as billed, is what the fake was shown
        if attempt == 1:
            assert rejected & set(strings(json.loads(unpack(raw))))
    for reask in reasks:
        assert "`sentiment`" in reask["feedback"] or "not valid JSON" in reask["feedback"]
        assert "Answer again with valid JSON" in reask["feedback"]
    stats = fake.stats()
    step = api.plan(spec, save=False).header.steps[0]
    billed = ModelPrice.from_dict(step.price or {}).cost(
        stats["input_tokens"], stats["output_tokens"], batch=mode == "batch"
    )
    assert result.cost_usd == pytest.approx(billed, rel=1e-9)  # every attempt paid, re-asks included
    assert 0 < result.wasted_usd < result.cost_usd


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_reasks_stay_bounded_by_max_attempts_and_are_all_paid(fake, workdir, mode):
    fake.configure(malformed=1.0)
    spec = reask_spec(workdir, "openai", "gpt-4.1-mini", None, mode)
    result = api.apply(spec, handle_signals=False)
    assert (result.succeeded, result.failed) == (0, 4)
    assert set(query("SELECT error_code, attempts FROM results")) == {("invalid_output", 3)}
    assert fake.stats()["answered"] == 12 and len(fake.stats()["reasks"]) == 8
    assert query("SELECT count(*), count(*) FILTER (WHERE cost_usd > 0) FROM attempts") == [(12, 12)]
    assert result.wasted_usd == pytest.approx(result.cost_usd, rel=1e-9) and result.cost_usd > 0


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_a_plausible_mistake_is_re_asked_with_the_validators_message(fake, workdir, mode):
    """The fake's realistic rejections (`reject_share`: a field left out, a value off its enum or
    bound) in both modes: the re-ask names the mistake and the next answer is accepted (the batch
    fake raised on them: a batch re-ask walk could not run)."""
    fake.configure(reject_share=[1.0, 0.0])
    result = api.apply(reask_spec(workdir, "openai", "gpt-4.1-mini", None, mode), handle_signals=False)
    assert (result.status, result.succeeded) == ("succeeded", 4)
    assert set(query("SELECT attempts FROM results")) == {(2,)}
    reasks = fake.stats()["reasks"]
    assert len(reasks) == 4 and fake.stats()["faults"]["mistake"] == 4
    assert all("rejected" in r["feedback"] and r["rejected"] for r in reasks)


def test_a_reasked_answer_is_cached_under_the_rows_request_key(fake, workdir):
    fake.configure(malformed_until_feedback=True)
    spec = reask_spec(workdir, "anthropic", "claude-haiku-4-5", None, "realtime")
    api.apply(spec, handle_signals=False)
    assert query("SELECT count(DISTINCT request_key), count(*) FROM attempts") == [(4, 8)]
    answered = fake.stats()["answered"]
    again = api.apply(spec, handle_signals=False)
    assert fake.stats()["answered"] == answered and again.cost_usd == 0  # nothing paid twice
    assert api.plan(spec, save=False).header.totals.to_run == 0


def test_a_reask_reserves_its_longer_input_and_the_plan_allows_for_it(workdir):
    spec = reask_spec(workdir, "openai", "gpt-4.1-mini", None, "realtime")
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    runtime = StepRuntime(step, provider=None, price=ModelPrice.from_dict(step.price or {}))  # type: ignore[arg-type]
    item = WorkItem("k", step.name, ({"role": "user", "content": "Review: one"},), 12)
    planned = runtime.request(item)
    error = InvalidOutputError("bad")
    error.rejected, error.violations = "x " * 40, ("$.score: 9 is greater than the maximum of 5",)
    retry = ReaskPolicy().next_request(planned, error, step.max_tokens)
    assert retry is not None
    assert runtime.attempt_upper_cost(item, planned) == runtime.upper_cost(item)
    assert runtime.attempt_upper_cost(item, retry) > runtime.upper_cost(item)
    header = plan.header
    assert reask_upper(header) > header.totals.cost_upper * 3  # the re-asks' added input is allowed for


def one_row_spec(folder: Path, **limits: Any) -> Path:
    path = provider_spec(folder, "openai", "gpt-4.1-mini", rows=1)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["limits"].update({"max_attempts": 3, "concurrency": 1, **limits})
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def stop_after_first_rejection(spec: Path) -> None:
    """A budget of exactly one planned attempt: the run stops right after a rejection (its re-ask's
    reservation does not fit), as a crash there would leave it: the rejected attempt in the ledger,
    the row without a result."""
    one_attempt = api.plan(spec, save=False).header.totals.cost_upper
    stopped = api.apply(spec, max_cost=one_attempt * 1.001, handle_signals=False)
    assert stopped.status == "budget" and stopped.succeeded == 0
    assert query("SELECT count(*) FROM results") == [(0,)]


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_a_reask_interrupted_before_it_was_sent_is_sent_with_its_feedback_on_resume(fake, workdir, mode):
    fake.configure(malformed_until_feedback=True)
    spec = one_row_spec(workdir, **(FAST if mode == "batch" else {}))
    stop_after_first_rejection(spec)
    assert fake.stats()["answered"] == 1 and not fake.stats()["reasks"]
    [(outcome, feedback)] = query("SELECT outcome, feedback FROM attempts")
    kept = json.loads(feedback)
    assert outcome == "invalid_output" and kept["rejected"] and kept["violations"]

    resumed = api.apply(spec, max_cost=1, handle_signals=False)
    assert (resumed.status, resumed.succeeded) == ("succeeded", 1)
    stats = fake.stats()
    assert stats["answered"] == 2  # the re-ask only, not the planned request again
    [reask] = stats["reasks"]
    assert reask["rejected"] == kept["rejected"] and "Answer again with valid JSON" in reask["feedback"]
    assert query("SELECT attempt, outcome FROM attempts ORDER BY attempt") == [(1, "invalid_output"), (2, "ok")]
    assert query("SELECT attempts FROM results") == [(2,)]


def test_an_interrupted_rejection_on_its_last_attempt_fails_without_another_call(fake, workdir):
    fake.configure(malformed=1.0)
    spec = one_row_spec(workdir)
    stop_after_first_rejection(spec)
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_attempts: 3", "max_attempts: 1"), encoding="utf-8")
    result = api.apply(spec, max_cost=1, handle_signals=False)
    assert result.failed == 1 and fake.stats()["answered"] == 1  # no call: its one attempt was made
    assert query("SELECT error_code, attempts FROM results") == [("invalid_output", 1)]
