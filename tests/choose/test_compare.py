"""`batchor compare`: one seeded sample on several models, measured against the spec's checks and
golden labels, within one budget, and the cheapest model that passes every check."""

from __future__ import annotations

import json

import pytest

import batchor
from batchor.choose import check_budget
from batchor.errors import EXIT_CHECKS_FAILED, CostLimitError
from tests.conftest import SENTIMENT_SCHEMA, make_spec, write_csv

NANO, MINI, FULL = "openai:gpt-4.1-nano", "openai:gpt-4.1-mini", "openai:gpt-4.1"
MODELS = f"{NANO},{MINI},{FULL}"
LABELS = ("positive", "negative", "mixed")


def labelled_spec(folder, rows: int = 60, min_accuracy: float = 0.85):
    spec = make_spec(
        folder,
        rows=rows,
        steps={
            "classify": {
                "system": "Classify.",
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": SENTIMENT_SCHEMA},
                "expected": {"sentiment": "label"},
                "checks": [{"metric": "classify.sentiment.accuracy", "min": min_accuracy}],
            }
        },
    )
    labels = [LABELS[i % 3] for i in range(rows)]
    data = [{"id": f"r{i}", "text": f"review {i} [truth: {label}]", "label": label} for i, label in enumerate(labels)]
    write_csv(folder / "data.csv", data)
    return spec


@pytest.fixture
def graded_fake(fake):
    fake.configure(
        model_accuracy={"gpt-4.1-nano": 0.5, "gpt-4.1-mini": 0.95, "gpt-4.1": 1.0},
        model_latency_ms={"gpt-4.1": 150},  # the others answer at once
    )
    return fake


def test_compare_names_the_cheapest_model_passing_every_check(workdir, graded_fake):
    spec = labelled_spec(workdir)
    found = batchor.compare(spec, MODELS.split(","), 30, max_cost=1)
    by_model = {r.model: r for r in found.results}
    assert [r.model for r in found.results] == [NANO, MINI, FULL]
    assert found.cheapest_passing is not None and found.cheapest_passing.model == MINI
    assert not by_model[NANO].passed and by_model[NANO].failed_checks
    assert by_model[MINI].passed and by_model[FULL].passed
    assert by_model[FULL].metrics["classify.sentiment.accuracy"] == 1.0
    assert by_model[NANO].metrics["classify.sentiment.accuracy"] < 0.85
    # the projected full job follows the prices (4.1 costs 5x mini, 20x nano per token)
    assert by_model[NANO].projected < by_model[MINI].projected < by_model[FULL].projected
    assert by_model[FULL].projected == pytest.approx(5 * by_model[MINI].projected, rel=0.05)
    assert found.reference == FULL and by_model[FULL].agreement is None
    assert by_model[MINI].agreement > by_model[NANO].agreement and by_model[MINI].compared >= 30
    assert by_model[FULL].latency_p50_ms >= 150 and by_model[NANO].latency_p50_ms is not None  # the fake holds 4.1
    assert found.spent == pytest.approx(sum(r.sample_cost for r in found.results)) and found.spent > 0
    assert "cheapest model that passes every check: openai:gpt-4.1-mini" in str(found)


def test_a_second_compare_pays_nothing_and_gives_the_same_figures(workdir, graded_fake):
    spec = labelled_spec(workdir)
    first = batchor.compare(spec, [NANO, MINI], 20, reference=MINI)
    sent = graded_fake.stats()["requests"]
    again = batchor.compare(spec, [NANO, MINI], 20, reference=MINI)
    assert graded_fake.stats()["requests"] == sent and again.spent == 0
    assert [r.sample_cost for r in again.results] == pytest.approx([r.sample_cost for r in first.results])
    assert [r.projected for r in again.results] == pytest.approx([r.projected for r in first.results], rel=1e-6)


def test_max_cost_covers_all_models_and_is_checked_before_any_call(workdir, graded_fake):
    spec = labelled_spec(workdir)
    bounds = check_budget(spec, 20, 0, [NANO, MINI, FULL], {"state": None, "mock": False, "mode": None}, None)
    one = bounds[FULL]
    with pytest.raises(CostLimitError) as caught:
        batchor.compare(spec, MODELS.split(","), 20, max_cost=one * 1.01)  # enough for any one, not for all three
    assert "3 models" in caught.value.message and graded_fake.stats()["requests"] == 0


def test_the_cli_prints_markdown_json_and_exits_9_when_no_model_passes(workdir, graded_fake, batchor_cli):
    spec = labelled_spec(workdir, min_accuracy=0.99)
    args = ("compare", spec, "--sample", "20", "--models")
    done = batchor_cli(workdir, *args, f"{NANO},{MINI}", "--yes", "--format", "markdown")
    assert done.returncode == EXIT_CHECKS_FAILED, done.stderr
    assert "| openai:gpt-4.1-mini |" in done.stdout and "cheapest model that passes every check: none" in done.stdout
    assert "checks_failed" in done.stderr
    done = batchor_cli(workdir, *args, f"{NANO},{FULL}", "--max-cost", "1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["cheapest_passing"] == FULL and [m["passed"] for m in data["models"]] == [False, True]
