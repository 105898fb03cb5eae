"""Accepted answers are validated once per schema (engine/recorder.py `judge`): the same text
stores the same output as the first time, rejected answers are judged every time, and each
schema judges a text by its own rules."""

from __future__ import annotations

import pytest

from batchor import api
from batchor.engine.recorder import judge
from batchor.errors import InvalidOutputError
from batchor.providers.base import Completion
from tests.providers.helpers import provider_spec

RATING = {
    "type": "object",
    "properties": {"stars": {"type": "integer", "minimum": 1, "maximum": 5}, "note": {"type": "string"}},
    "required": ["stars"],
    "additionalProperties": False,
}
STRICTER = {**RATING, "properties": {**RATING["properties"], "stars": {"type": "integer", "maximum": 3}}}


def step_plan(workdir, schema, name):
    folder = workdir / name
    folder.mkdir()
    return api.plan(provider_spec(folder, "openai", "gpt-4.1-mini", rows=1, schema=schema), save=False).header.steps[0]


def test_a_repeated_answer_stores_what_its_first_judgement_stored(workdir):
    plan = step_plan(workdir, RATING, "a")
    text = '```json\n{"stars": 4, "note": null}\n```'  # fenced, optional null dropped
    first = judge(plan, Completion(text=text))
    assert first == '{"stars":4}'
    assert [judge(plan, Completion(text=text)) for _ in range(3)] == [first] * 3
    assert judge(plan, Completion(text='{"stars": 4, "note": "é"}')) == '{"stars":4,"note":"é"}'


def test_a_rejected_answer_is_rejected_every_time_with_its_violations(workdir):
    plan = step_plan(workdir, RATING, "a")
    for _ in range(2):
        with pytest.raises(InvalidOutputError) as caught:
            judge(plan, Completion(text='{"stars": 9}'))
        assert caught.value.rejected == '{"stars": 9}'
        assert any("9 is greater than the maximum of 5" in v for v in caught.value.violations)


def test_each_schema_judges_the_same_text_by_its_own_rules(workdir):
    lenient, strict = step_plan(workdir, RATING, "a"), step_plan(workdir, STRICTER, "b")
    assert judge(lenient, Completion(text='{"stars": 5}')) == '{"stars":5}'
    with pytest.raises(InvalidOutputError):
        judge(strict, Completion(text='{"stars": 5}'))
    assert judge(lenient, Completion(text='{"stars": 5}')) == '{"stars":5}'
