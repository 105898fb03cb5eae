"""Plan stage: token counts remembered across processes, so a re-plan need not build the tokenizer.

Building tiktoken's o200k encoding from its 200,000 ranks costs about 0.3 s of CPU in every
process that counts a token, and small jobs are planned again and again with the same texts
(`--sample 20` while iterating, `apply` after `plan`, a re-apply). An `Encoder` counts through a
memo of the texts counted before with the same vocabulary: a file per vocabulary in batchor's cache
beside its parsed ranks (`vocab/<name>-<hash>.counts`), of fixed 16-byte records (a 12-byte
blake2b digest of the text, then its count). The encoding is built only when a text is not in the
memo. A record that cannot be read is a miss; the file starts over when it outgrows `MAX_RECORDS`
(reading a full memo costs a few percent of a build).
Counts are exact either way: only counts made with the real encoding are ever stored.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Encoder", "MAX_RECORDS"]

MAX_RECORDS = 65_536  # 1 MB, read in about 10 ms: a small part of the 0.3 s a build costs
_DIGEST = 12
_FORMAT = struct.Struct(f"<{_DIGEST}sI")  # digest, count
_RECORD = _FORMAT.size


class Encoder:
    """Counts tokens with one tiktoken encoding, built by `load` on the first text not in the memo."""

    def __init__(self, load: Callable[[], Any], memo_path: Path | None, encoding: Any = None) -> None:
        self._load = load
        self._encoding = encoding
        self._path = memo_path
        self._memo: dict[bytes, int] | None = None
        self._off = False  # True once a job has counted more texts than a memo keeps
        self._rewrite = False  # the file ended in a torn record: appending after it would misalign the rest

    @property
    def encoding(self) -> Any:
        if self._encoding is None:
            self._encoding = self._load()
        return self._encoding

    def counts(self, texts: Sequence[str], count_misses: Callable[[list[str]], list[int]]) -> list[int]:
        """The count of each (distinct) text: from the memo, else `count_misses` (which uses
        `self.encoding`), remembering what it counted."""
        if self._off or len(texts) > MAX_RECORDS:  # a big job: counting it all costs far more than a build
            return count_misses(list(texts))
        memo = self._read_memo()
        digests = [_digest(text) for text in texts]
        found = [memo.get(digest) for digest in digests]
        missing = [i for i, count in enumerate(found) if count is None]
        if missing:
            counted = count_misses([texts[i] for i in missing])
            for i, count in zip(missing, counted):
                found[i] = memo[digests[i]] = count
            new = [(digests[i], count) for i, count in zip(missing, counted)]
            self._remember(list(memo.items()) if self._rewrite else new, len(memo), self._rewrite)
            if len(memo) > MAX_RECORDS:  # a big job counted in parts: no digest of its every text kept
                self._off, self._memo = True, {}
        return found  # type: ignore[return-value]  # every slot is filled above

    def _read_memo(self) -> dict[bytes, int]:
        if self._memo is None:
            self._memo, self._rewrite = _read(self._path) if self._path is not None else ({}, False)
        return self._memo

    def _remember(self, new: list[tuple[bytes, int]], size: int, rewrite: bool) -> None:
        if self._path is None or not new:
            return
        if size > MAX_RECORDS:  # outgrown: start over with what was just counted
            new, rewrite = new[-MAX_RECORDS:], True
        data = b"".join(_FORMAT.pack(digest, count) for digest, count in new if count < 2**32)
        # One unbuffered append of whole records, so processes counting at once do not interleave.
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if rewrite else os.O_APPEND)
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path, flags, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError:
            self._path = None  # a memo that cannot be written is simply not kept
        self._rewrite = False


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_DIGEST).digest()


def _read(path: Path) -> tuple[dict[bytes, int], bool]:
    """The remembered counts, and whether the file ended in a torn record (a process killed mid-write)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}, False
    end = len(data) - len(data) % _RECORD
    return dict(_FORMAT.iter_unpack(memoryview(data)[:end])), end != len(data)
