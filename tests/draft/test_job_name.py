"""A drafted job's name is a few content words of the task, not the sentence slugged."""

from __future__ import annotations

from pathlib import Path

from batchor.draft.files import schema_path_for
from batchor.draft.template import job_name


def test_job_names_are_short():
    assert job_name("Classify each of the reviews by sentiment and say why") == "classify-reviews-sentiment"
    assert job_name("tag each review with its product area") == "tag-review-product"
    assert len(job_name("summarise " + "verylongword " * 20)) <= 32
    assert job_name("!!!") == "drafted-job"


def test_the_output_schema_is_named_after_the_job():
    assert schema_path_for(Path("jobs/spec.yaml"), "triage") == Path("jobs/triage.output.schema.json")
    assert schema_path_for(Path("jobs/spec.yaml"), "../evil") == Path("jobs/spec.output.schema.json")
    # a spec -o named gets its own schema: two drafts of one job in a folder must not share one
    assert schema_path_for(Path("jobs/a.yaml"), "triage") == Path("jobs/a.output.schema.json")
