"""A small tmpfs for tests of a full disk (the `small_disk` fixture: import it into the test module)."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture
def small_disk(tmp_path):
    """A small tmpfs (1 MB) and `resize(size, empty=False)`: a real filesystem that runs out of
    space (root only; skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")

    def resize(size: str, *, empty: bool = False) -> None:
        for path in mount.iterdir() if empty else ():
            subprocess.run(["rm", "-rf", str(path)], check=True)
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)

    yield mount, resize
    subprocess.run(["umount", "-l", str(mount)], check=False)
