"""A saved plan replays exactly what it showed, including `--refresh`, `--no-cache`, `--sample`
and `--limit`: the requests the plan counts "to run" are the requests `apply PLANFILE` sends."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import make_spec

ROWS = 12


def planned(cli, workdir, *options: str) -> dict:
    result = cli(workdir, "plan", "spec.yaml", "--json", "--out", "saved.plan", *options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def output_keys(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row["_row_key"] for row in csv.DictReader(handle)]


@pytest.mark.parametrize("options", [["--no-cache"], ["--refresh", "classify"]])
def test_a_saved_plan_that_ignores_the_cache_sends_what_it_counted(workdir, fake, options, batchor_cli):
    make_spec(workdir, rows=ROWS)
    assert batchor_cli(workdir, "apply", "spec.yaml", "--yes").returncode == 0  # everything is cached now
    fake.reset()
    plan = planned(batchor_cli, workdir, *options)
    assert plan["totals"]["to_run"] == ROWS
    result = batchor_cli(workdir, "apply", "saved.plan")
    assert result.returncode == 0, result.stderr
    assert fake.stats()["requests"] == ROWS  # today: 0, the file forgot the flag


@pytest.mark.parametrize("options", [["--sample", "5"], ["--limit", "4"]])
def test_a_saved_sampled_plan_runs_exactly_its_rows(workdir, fake, options, batchor_cli):
    make_spec(workdir, rows=ROWS)
    plan = planned(batchor_cli, workdir, *options)
    wanted = int(options[1])
    assert plan["totals"]["to_run"] == wanted
    result = batchor_cli(workdir, "apply", "saved.plan")
    assert result.returncode == 0, result.stderr
    assert fake.stats()["requests"] == wanted
    name = f"results.{options[0].lstrip('-')}-{wanted}.csv"  # a partial run writes beside the spec's output
    assert plan["output"]["path"] == str(workdir / "out" / name)
    assert len(output_keys(plan["output"]["path"])) == wanted
    assert not (workdir / "out" / "results.csv").exists()
