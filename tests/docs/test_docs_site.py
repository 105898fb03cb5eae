"""Every page under docs/ is in mkdocs.yml's nav, and every nav entry is a page: a helper adding a
guide sees it here without building the site (CI's `mkdocs build --strict` checks links too)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    if isinstance(node, list):
        return [page for value in node for page in _nav_pages(value)]
    return [str(node)]


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == [], "add these pages to `nav:` in mkdocs.yml"
    assert [p for p in nav if p not in pages] == [], "these nav entries have no page in docs/"
    assert len(nav) == len(set(nav))


def test_the_readme_stays_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, "README.md is the front page: move details to docs/"


def test_the_readmes_contract_commands_are_what_ci_runs():
    """The README's quickstart and test commands are the ones .ci/run runs (its skip markers say so)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace("pip install -q ", "pip install ")
    quickstart = "pip install -e . && batchor apply specs/reviews.yaml --mock --yes"
    tests = 'pip install -e ".[test]" && python -m pytest'
    assert quickstart in readme and tests in readme
    assert quickstart in ci
    assert 'pip install -e ".[test]"' in ci and "python -m pytest" in ci
