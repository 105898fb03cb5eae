"""Owner-only files and folders for everything batchor writes that may hold prompts or answers."""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make the leaf 0700, whatever the umask."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except PermissionError:  # a folder someone else owns: leave it as it is
        pass
    return path
