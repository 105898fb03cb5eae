"""Hostile specs, plans and drafter answers: a project folder with a secret file beside it (the
`project` fixture: import it into a test module)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import write_csv

SECRET = "TOP-SECRET-4f1c9a"


def write_job(project: Path, **changes: Any) -> Path:
    """A one-step mock job in `project` (a git repository); `changes` update top-level spec keys."""
    write_csv(project / "data.csv", [{"id": f"r{i}", "text": f"review {i}"} for i in range(3)])
    spec: dict[str, Any] = {
        "name": "hostile",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "mock", "name": "echo"},
        "steps": {"classify": {"prompt": "Review: {{ row.text }}"}},
        "output": {"path": "out/results.csv"},
    }
    spec.update(changes)
    path = project / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and mtime: what a run wrote shows as a difference."""
    found = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            stat = path.lstat()
            found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def project(tmp_path, monkeypatch):
    """`tmp_path/project` (a git repository, the working folder, state inside it) next to
    `tmp_path/outside/secret.txt`, which nothing may read or write."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"id,text\ns1,{SECRET}\n", encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    return root
