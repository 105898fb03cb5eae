"""The batchor version, in one place (pyproject reads it, plans record it), and where this copy
was installed from: `batchor --version` says so, because a bug report about "batchor" is only
useful once we know which copy (a git tag, a wheel, an editable checkout) is running."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

__version__ = "0.2.0"
# PyPI's `batchor` is an unrelated project; ours is distributed as `batchor-llm`. The import and
# the command stay `batchor`.
DISTRIBUTION = "batchor-llm"


def install_origin() -> str:
    """Where the installed distribution came from, read from its PEP 610 `direct_url.json`."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"not installed as {DISTRIBUTION} (running from the source folder {Path(__file__).parent.parent})"
    text = dist.read_text("direct_url.json")
    if not text:
        return f"a package index ({DISTRIBUTION} {dist.version})"
    return describe_direct_url(json.loads(text))


def describe_direct_url(data: dict[str, object]) -> str:
    """One line for a PEP 610 record: a git URL at a revision, a local file or folder, or a URL."""
    url = str(data.get("url", ""))
    vcs, folder, archive = data.get("vcs_info"), data.get("dir_info"), data.get("archive_info")
    if isinstance(vcs, dict):
        revision = vcs.get("requested_revision")
        commit = str(vcs.get("commit_id", ""))
        at = f"@{revision}" if revision else ""
        return f"{vcs.get('vcs', 'vcs')}+{url}{at} (commit {commit[:12]})"
    where = _local_path(url)
    if isinstance(folder, dict):
        return f"{'an editable checkout' if folder.get('editable') else 'a local folder'} {where}"
    if isinstance(archive, dict):
        return f"the file {where}" if url.startswith("file:") else f"the archive {url}"
    return url or "an unknown source"


def _local_path(url: str) -> str:
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else url
