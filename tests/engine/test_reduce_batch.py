"""Reduce and split steps in batch mode: each level of the groups' fold trees is a provider batch,
the plan's count is the rows submitted, and a kill at any point of a batch's life resumes without
sending a request twice (real openai SDK against the fake provider; kills in subprocesses)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

import batchor
from tests.conftest import write_csv
from tests.engine.batch_helpers import FAST, cli, results, submitted

SUMMARY = {
    "type": "object",
    "properties": {"points": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["points"],
    "additionalProperties": False,
}


def _spec(folder: Path) -> Path:
    text = "the battery lasts two days but the strap broke after a week of daily running"
    rows = [{"id": f"a{i}", "product": "watch", "text": f"{text} ({i})"} for i in range(30)]
    rows += [{"id": f"b{i}", "product": "kettle", "text": f"boils fast ({i})"} for i in range(3)]
    write_csv(folder / "data.csv", rows)
    spec = {
        "name": "grouped_batch",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 40}, "context_window": 400},
        "steps": {
            "summary": {
                "reduce": {
                    "group_by": ["product"],
                    "fold_prompt": "Merge:{% for p in group.rows %}\n- {{ p.points | join('; ') }}{% endfor %}",
                },
                "prompt": "Summarise {{ group.key.product }}:{% for r in group.rows %}\n- {{ r.text }}{% endfor %}",
                "output": {"schema": SUMMARY},
            }
        },
        "output": {"path": "out/groups.csv"},
        "limits": {**FAST, "batch_max_requests": 3},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_folded_reduce_runs_level_by_level_in_batches_as_planned(fake, workdir):
    spec = _spec(workdir)
    planned = batchor.plan(str(spec)).steps["summary"]["to_run"]
    assert batchor.apply(str(spec)).status == "succeeded"
    counts = submitted(fake)
    assert sum(counts.values()) == len(counts) == planned > 2  # every part and fold once, nothing else
    assert fake.stats()["requests"] == 0  # no realtime call: every level went through a batch
    assert len(results(workdir)) == planned


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("point", ["after_intent", "after_submit", "during_poll", "after_results"])
def test_kill_during_a_reduce_batch_then_resume_sends_each_request_once(fake, workdir, point):
    spec = _spec(workdir)
    planned = batchor.plan(str(spec)).steps["summary"]["to_run"]
    killed = cli(workdir, "apply", spec, "--yes", crash_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = cli(workdir, "apply", spec, "--yes")
    assert done.returncode == 0, done.stderr
    counts = submitted(fake)
    assert len(counts) == planned and set(counts.values()) == {1}, counts
    assert {status for status, _, _ in results(workdir).values()} == {"succeeded"}
