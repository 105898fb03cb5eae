"""Owner-only files and folders for everything batchor writes that may hold prompts or answers."""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create `path` (and parents); folders batchor creates are 0700 whatever the umask.

    A folder that already exists is left as it is: it may be shared (/tmp, a project root)."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    path.mkdir(parents=True, exist_ok=True)
    for created in missing:
        try:
            os.chmod(created, 0o700)
        except PermissionError:
            pass
    return path
