"""Plan stage: where batchor keeps what it derives once and reuses across processes.

`BATCHOR_CACHE_DIR` if set, else `$XDG_CACHE_HOME/batchor`, else `~/.cache/batchor`. Only data
that can be rebuilt lives there (parsed tokenizer vocabularies, price-table answers).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["cache_folder", "write_atomically"]


def cache_folder(name: str) -> Path:
    """The folder for cached data of one kind (created by whoever writes to it)."""
    configured = os.environ.get("BATCHOR_CACHE_DIR")
    if configured:
        return Path(configured) / name
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "batchor" / name


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; a cache that cannot be written is simply not kept."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
