"""The container image (Dockerfile) and the deployment examples that use it: hadolint passes, the
image is built from this checkout and runs batchor as a non-root user, the examples build or
reference that image (never a registry name), and no database password sits in a URL or a
command line. Its install and entrypoint commands run for real in tests/adopt/ (slow tier)."""

from __future__ import annotations

import re
import subprocess

import yaml
from action_helpers import ROOT, linter

DOCKERFILE = ROOT / "Dockerfile"
DEPLOY = ROOT / "examples" / "deploy"


def instructions(path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_hadolint_passes_on_the_dockerfiles():
    hadolint = linter("hadolint")
    for path in (DOCKERFILE, DEPLOY / "job.Dockerfile"):
        done = subprocess.run([hadolint, str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_slim_built_from_the_checkout_non_root_with_batchor_as_entrypoint():
    steps = instructions(DOCKERFILE)
    bases = [args for op, args in steps if op == "FROM"]
    assert bases and all(base.startswith("python:3.11-slim") for base in bases)
    assert ("COPY", "batchor ./batchor") in steps  # the checkout's package, no registry name
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM") :]
    user = [args for op, args in final if op == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert ("ENTRYPOINT", '["batchor"]') in final
    assert "pip install batchor" not in DOCKERFILE.read_text()


def test_compose_builds_the_image_from_this_repository_and_keeps_the_password_out_of_urls():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    for name in ("plan", "worker"):
        service = compose["services"][name]
        assert (DEPLOY / service["build"]).resolve() == ROOT and (ROOT / "Dockerfile").is_file()
        assert service["command"][0] in ("plan", "apply")  # arguments to the image's entrypoint
        env = service["environment"]
        assert env["BATCHOR_STATE"] == "postgresql://batchor@db/batchor"  # no password in the URL
        assert env["PGPASSWORD"].startswith("${POSTGRES_PASSWORD")
    assert compose["services"]["worker"]["deploy"]["replicas"] > 1
    for path in DEPLOY.iterdir():
        assert "pip install" not in path.read_text(), path


def test_the_kubernetes_job_runs_the_image_non_root_with_secrets_from_the_cluster():
    job = yaml.safe_load((DEPLOY / "k8s-job.yaml").read_text())
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert "command" not in container and container["args"][0] == "apply"  # the entrypoint is batchor
    env = {e["name"]: e for e in container["env"]}
    assert {"BATCHOR_STATE", "PGPASSWORD"} <= set(env)
    assert all("valueFrom" in e for e in env.values())
    assert "FROM batchor:" in (DEPLOY / "job.Dockerfile").read_text()
