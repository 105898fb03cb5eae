"""Plan files: save and load a compiled plan as one self-contained, content-hashed file.

Layout: a zip with `plan.json` (the header, including `plan_id` = hash of the header and
`data_sha256` = hash of the data) and `data.parquet` (stored uncompressed in the zip so it is read
in place). Loading verifies both hashes: a truncated or edited plan is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from batchor import arrow_pool
from batchor.errors import PlanFileError, PlanTooLargeError
from batchor.file_modes import private_dir
from batchor.fingerprint import canonical_json, sha256_hex
from batchor.humanize import money
from batchor.plan.model import PLAN_FORMAT_VERSION, PlanHeader

arrow_pool.use_returning_pool()  # a pool that gives freed memory back

HEADER_MEMBER = "plan.json"
MAX_HEADER_BYTES = 16 << 20  # a header holds the spec, its templates and schemas: far below this
DATA_MEMBER = "data.parquet"


SMALL_DATA_BYTES = 8 << 20  # plan data up to this size on disk is read once and kept in memory


def plan_id_for(header: PlanHeader) -> str:
    """Hash of the header without its id and creation time: same content, same id."""
    return _header_hash(header.model_dump(mode="json", by_alias=True))


# How the state was found describes, it is not content; the seal signs the hash (plan/trust.py).
_NOT_HASHED = ("plan_id", "created_at", "state_source", "seal")


def _header_hash(body: dict) -> str:
    """The id of a header as JSON. A saved plan is checked on the JSON it holds, so a plan saved
    by an older batchor (whose header lacks fields added since) still verifies."""
    return sha256_hex(canonical_json({k: v for k, v in body.items() if k not in _NOT_HASHED}))[:16]


def job_id_for(header: PlanHeader) -> str:
    """Identity of the work (input + request definitions), stable across re-plans of one spec."""
    steps = [(s.name, s.key_prefix, s.system, s.prompt, s.when, s.depends_on) for s in header.steps]
    return sha256_hex(canonical_json([header.input.fingerprint, steps, header.mocked]))[:16]


class CompiledPlan:
    """A header plus its data (a parquet file on disk, or a member of a saved plan zip)."""

    def __init__(
        self, header: PlanHeader, data_path: Path | None = None, zip_path: Path | None = None, cleanup: bool = False
    ) -> None:
        self.header = header
        self._data_path = data_path
        self._zip_path = zip_path
        self._cleanup = cleanup
        self.saved_path: Path | None = zip_path
        self.source_data: Any = None  # the DataFrame/Table a Python caller planned from, if any
        self._small: pa.Table | bool | None = None  # the data, kept when small (see _small_table)

    @property
    def plan_id(self) -> str:
        return self.header.plan_id

    # --- the notebook / script face ------------------------------------------------------------

    @property
    def rows(self) -> int:
        return self.header.totals.rows

    @property
    def to_run(self) -> int:
        return self.header.totals.to_run

    @property
    def cost(self) -> dict[str, float]:
        """Estimated cost in USD: `expected` and the `upper` bound that --max-cost checks."""
        t = self.header.totals
        return {"expected": t.cost_expected, "upper": t.cost_upper}

    @property
    def steps(self) -> dict[str, dict]:
        """Per-step counts: rows, to_run, cached, skipped, tokens, cost."""
        return {s.name: s.counts.model_dump() for s in self.header.steps}

    @classmethod
    def load(cls, path: str | Path) -> "CompiledPlan":
        return load_plan(Path(path))

    def __str__(self) -> str:
        from batchor.plan.summary import plan_text

        return plan_text(self)

    def __repr__(self) -> str:
        t = self.header.totals
        return f"<Plan {self.plan_id} {self.header.name!r}: {t.rows} rows, {t.to_run} to run, {money(t.cost_expected)}>"

    def _repr_markdown_(self) -> str:
        from batchor.plan.summary import plan_markdown

        return plan_markdown(self)

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(str(self)) + "</pre>"

    def _archive(self) -> Path:
        """The saved plan zip holding the data (a plan without a data file always has one)."""
        assert self._zip_path is not None, "a plan needs a data file or a saved plan zip"
        return self._zip_path

    @property
    def job_id(self) -> str:
        return job_id_for(self.header)

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 16384) -> Iterator[pa.RecordBatch]:
        table = self._small_table()
        if table is not None:  # read once: apply reads a few columns per step, each read parses the footer
            yield from (table if columns is None else table.select(columns)).to_batches(max_chunksize=batch_size)
            return
        if self._data_path is not None:
            yield from pq.ParquetFile(self._data_path).iter_batches(batch_size=batch_size, columns=columns)
            return
        with zipfile.ZipFile(self._archive()) as archive, archive.open(DATA_MEMBER) as member:
            yield from pq.ParquetFile(member).iter_batches(batch_size=batch_size, columns=columns)

    def _small_table(self) -> pa.Table | None:
        """The whole data when it is at most SMALL_DATA_BYTES on disk, read on first use and kept;
        None for bigger data, streamed from the file at each read (memory stays flat). A read
        parses the file's footer, which grows with the columns (four per step): at 2,000 steps,
        about 0.9 s a read, four thousand reads an apply, for data of a few rows."""
        if self._small is None:
            self._small = False
            if self._data_bytes() <= SMALL_DATA_BYTES:
                self._small = pa.Table.from_batches(list(self._stream_all()))
        return self._small if isinstance(self._small, pa.Table) else None

    def _data_bytes(self) -> int:
        if self._data_path is not None:
            return self._data_path.stat().st_size
        with zipfile.ZipFile(self._archive()) as archive:
            return archive.getinfo(DATA_MEMBER).file_size

    def _stream_all(self) -> Iterator[pa.RecordBatch]:
        if self._data_path is not None:
            yield from pq.ParquetFile(self._data_path).iter_batches()
            return
        with zipfile.ZipFile(self._archive()) as archive, archive.open(DATA_MEMBER) as member:
            yield from pq.ParquetFile(member).iter_batches()

    def data_columns(self) -> list[str]:
        if self._data_path is not None:
            return pq.read_schema(self._data_path).names
        with zipfile.ZipFile(self._archive()) as archive, archive.open(DATA_MEMBER) as member:
            return pq.ParquetFile(member).schema_arrow.names

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename), owner-only."""
        path = Path(path)
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".plan-", suffix=".tmp")
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w") as archive:
                archive.writestr(
                    HEADER_MEMBER,
                    self.header.model_dump_json(by_alias=True, indent=1),
                    compress_type=zipfile.ZIP_DEFLATED,
                )
                if self._data_path is not None:
                    archive.write(self._data_path, DATA_MEMBER, compress_type=zipfile.ZIP_STORED)
                else:
                    with (
                        zipfile.ZipFile(self._archive()) as src,
                        src.open(DATA_MEMBER) as member,
                        archive.open(DATA_MEMBER, "w") as out,
                    ):
                        while chunk := member.read(1 << 20):
                            out.write(chunk)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        self.saved_path = path
        return path

    def close(self) -> None:
        if self._cleanup and self._data_path is not None and self._data_path.exists():
            self._data_path.unlink()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


def load_plan(path: Path) -> CompiledPlan:
    """Open a saved plan, refusing truncated, edited or newer-format files."""
    if not path.is_file():
        raise PlanFileError(f"plan file not found: {path}", hint="run `batchor plan SPEC` to create one")
    try:
        with zipfile.ZipFile(path) as archive:
            raw = json.loads(_bounded_header(archive, path))
            data_hash = _member_sha256(archive, DATA_MEMBER)
    except (zipfile.BadZipFile, KeyError, EOFError, OSError, ValueError) as exc:
        raise PlanFileError(
            f"{path} is not a readable batchor plan ({exc.__class__.__name__}: {exc})",
            hint="the file is truncated or damaged; re-create it with `batchor plan`",
        ) from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if not isinstance(version, int) or version > PLAN_FORMAT_VERSION:
        raise PlanFileError(
            f"{path} has plan format {version}; this batchor reads up to {PLAN_FORMAT_VERSION}",
            hint="upgrade batchor, or re-plan with this version",
        )
    try:
        header = PlanHeader.model_validate(raw)
    except ValidationError as exc:
        raise PlanFileError(
            f"{path}: plan header is invalid ({exc.error_count()} problems)",
            hint="re-create the plan with `batchor plan`",
        ) from None
    if _header_hash(raw) != header.plan_id or data_hash != header.data_sha256:
        raise PlanFileError(
            f"{path} was modified after it was created (content hash mismatch)",
            hint="plans are immutable: re-create it with `batchor plan`",
        )
    return CompiledPlan(header, zip_path=path)


def _bounded_header(archive: zipfile.ZipFile, path: Path) -> bytes:
    """The header's bytes, refused above `MAX_HEADER_BYTES` before it is inflated (a small zip can
    hold a header of gigabytes; zipfile stops reading at the declared size, so the check holds)."""
    size = archive.getinfo(HEADER_MEMBER).file_size
    if size > MAX_HEADER_BYTES:
        raise PlanTooLargeError(
            f"{path}: the plan header is {size:,} bytes, above the {MAX_HEADER_BYTES:,} a plan batchor makes "
            "can reach (its spec, templates and schemas)",
            hint="this file was not made by `batchor plan`: re-create the plan from the spec",
        )
    with archive.open(HEADER_MEMBER) as member:
        return member.read(MAX_HEADER_BYTES + 1)[:MAX_HEADER_BYTES]


def _member_sha256(archive: zipfile.ZipFile, name: str) -> str:
    digest = hashlib.sha256()
    with archive.open(name) as member:
        while chunk := member.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
