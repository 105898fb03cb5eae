"""examples/deploy/ (docker compose: PostgreSQL + N workers; a Kubernetes Job with parallelism N)
stays runnable: every `batchor` command line in them parses with the CLI's own commands and
options, and the workers share PostgreSQL state. The image's entrypoint is `batchor` (Dockerfile),
so a container's command (compose) or args (Kubernetes) are batchor's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
import yaml

from batchor.cli.main import app

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy"


def batchor_commands(command: list[str]) -> list[list[str]]:
    """The batchor argument lists a container runs: its command, given to the `batchor` entrypoint."""
    return [[str(word) for word in command]]


def parses(args: list[str]) -> None:
    """Parse `args` like the CLI does (no command is run): unknown commands or options raise."""
    group = typer.main.get_command(app)
    name, *rest = args
    command = group.commands[name]  # KeyError: no such command
    command.make_context(name, rest)


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_runs_a_plan_then_n_workers_on_postgres():
    services = compose()["services"]
    assert services["db"]["image"].startswith("postgres")
    plan, worker = services["plan"], services["worker"]
    assert [c[0] for c in batchor_commands(plan["command"])] == ["plan"]
    assert [c[0] for c in batchor_commands(worker["command"])] == ["apply"]
    assert worker["deploy"]["replicas"] > 1
    for service in (plan, worker):
        assert service["environment"]["BATCHOR_STATE"].startswith("postgresql://")
    assert worker["depends_on"]["plan"]["condition"] == "service_completed_successfully"


def test_kubernetes_job_runs_parallel_workers():
    job = yaml.safe_load((DEPLOY / "k8s-job.yaml").read_text(encoding="utf-8"))
    assert job["kind"] == "Job" and job["spec"]["parallelism"] > 1
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert [c[0] for c in batchor_commands(container["args"])] == ["apply"]
    assert any(e["name"] == "BATCHOR_STATE" for e in container["env"])


def all_command_lines() -> list[list[str]]:
    job = yaml.safe_load((DEPLOY / "k8s-job.yaml").read_text(encoding="utf-8"))
    lines = [c for s in compose()["services"].values() if "command" in s for c in batchor_commands(s["command"])]
    return lines + [c for k in job["spec"]["template"]["spec"]["containers"] for c in batchor_commands(k["args"])]


@pytest.mark.parametrize("args", all_command_lines(), ids=" ".join)
def test_every_command_line_parses_with_the_cli(args):
    parses(args)


def test_the_check_itself_refuses_a_wrong_option():
    with pytest.raises(Exception, match="No such option"):
        parses(["apply", "plans/job.plan", "--max-costs", "5"])
