"""Plan stage: a cache of a vocabulary's parsed ranks, so plans skip re-parsing the vocabulary file.

tiktoken's `load_tiktoken_bpe` base64-decodes 200,000 lines on every call (about 0.3 s of CPU for
o200k_base, on every `plan` and `apply`). The ranks it returns are written once, after tiktoken
checked the file against its pinned hash, as `marshal` data (which cannot run code when read)
behind a sha256 of that data: a damaged or truncated file is never used, only rebuilt.
"""

from __future__ import annotations

import hashlib
import marshal
from pathlib import Path

from batchor.plan.user_cache import write_atomically

__all__ = ["read", "write"]

_MAGIC = b"batchor-ranks-1\n"
_DIGEST = 32  # bytes of sha256


def read(path: Path) -> dict[bytes, int] | None:
    """The ranks stored at `path`, or None when the file is missing, damaged or of another kind."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    digest, payload = data[len(_MAGIC) : len(_MAGIC) + _DIGEST], data[len(_MAGIC) + _DIGEST :]
    if not data.startswith(_MAGIC) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        ranks = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return ranks if isinstance(ranks, dict) else None


def write(path: Path, ranks: dict[bytes, int]) -> None:
    """Store `ranks` at `path` atomically; a cache that cannot be written is simply not kept."""
    payload = marshal.dumps(ranks)
    write_atomically(path, _MAGIC + hashlib.sha256(payload).digest() + payload)
