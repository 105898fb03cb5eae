"""Owner-only files and folders for everything batchor writes that may hold prompts or answers.

State files, plan files, the plan key and output files are 0600; folders batchor creates 0700.
Specs and schemas `batchor draft` and `init` write are source files: they follow the umask."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600


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
