"""Parquet part files, the unit of every table a run stores: the lineage's candidates and the LLM ledger's calls and
findings all live as `<root>/<run>/<table>/part-<generation>-<uuid>.parquet`.

A part is written once under a name no other writer can pick (the uuid), through the storage's atomic publish, and
never changed: appending is adding a part, so concurrent writers, on one host or several sharing the store, never
touch the same file.

A part that cannot be read (cut short by a full disk or a copy, emptied, not Parquet at all) is skipped with a
warning that names it, never a traceback: every other part's rows still read (read_parts, read_tables). Parts
are written atomically, so such a part never comes from a crash of ksci itself, but from what happened to the
store's files afterwards.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ksci.lineage.storage import Storage

RESERVED_RUNS = {"sources"}  # folders of the store's root that are not runs
_RUN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]*$")
_PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
# What reading a damaged part raises: ArrowInvalid ("magic bytes not found", "file size is 0 bytes") is a
# ValueError, a damaged page an OSError (ArrowIOError) or another ArrowException.
_DAMAGE = (pa.ArrowException, OSError, ValueError)
_log = logging.getLogger(__name__)
_logged: set[str] = set()  # parts already warned about in this process: a damaged part warns once, not per read


def check_run(run: str) -> None:
    """Raise ValueError for a run name that could not be a folder of the store (or would be one of its own)."""
    if not _RUN_NAME.match(run or "") or run in RESERVED_RUNS:
        raise ValueError(f"invalid run name {run!r}: use letters, digits, '_', '-', '.', '=' (and not 'sources')")


def part_files(storage: Storage, folder: str) -> list[str]:
    """The part files of one table, sorted (the generation leads the name); temp files being written never match."""
    return storage.files(folder, "part-*.parquet")


def write_part(storage: Storage, folder: str, generation: int, table: pa.Table) -> None:
    """Publish `table` as a new part of the table in `folder`."""
    name = f"part-{generation:06d}-{uuid.uuid4().hex}.parquet"
    storage.write_atomic(f"{folder}/{name}", lambda f: pq.write_table(table, f))


def read_part(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    """One Parquet part file of a store (the lineage's, or the LLM ledger's), wherever the store lives.

    The file's bytes are read in Python, then parsed from memory in this thread: Arrow starts no read on a thread
    of its own (tests/test_lineage.py counts the process's threads). Arrow reading the Python file object itself
    (fsspec's) runs a read on a thread of its IO pool whose result wraps a Python buffer; when the interpreter
    exits before that thread has let go of it, the thread dies waiting for the GIL inside a noexcept frame and the
    process aborts ("terminate called without an active exception", apache/arrow#34314: a core dump of one such
    exit showed ~PyBuffer, under ReadAsync's future, on an Arrow worker). With pq.read_table, 6 of 1000 appending
    writers' exits aborted so; with ParquetFile on the file object, 24 of 2,200 exits of a process whose append
    fails at once (tests/test_faults.py's full disk; CI failed on it once); parsed from memory, 0 of 700
    (scripts/count_exit_aborts.py, 2026-12-02). Part files are small.
    """
    with storage.open(path) as f:
        data = f.read()
    return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns, use_threads=False)


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """The table as a frame; nullable Int64 and boolean keep integer and flag columns intact where values are null."""
    return table.to_pandas(types_mapper=_PANDAS_TYPES.get)


@dataclass(frozen=True)
class SkippedPart:
    """A part file that could not be read, and why."""

    path: str
    reason: str

    def warning(self) -> str:
        return f"skipped damaged part {self.path}: {self.reason}"


@dataclass(frozen=True)
class PartsRead:
    """The tables of the parts that could be read, in the order asked, their paths, and the parts that could not."""

    tables: list[pa.Table]
    paths: list[str]  # of `tables`, one each
    skipped: list[SkippedPart]


def read_parts(storage: Storage, paths: list[str], columns: list[str] | None = None) -> PartsRead:
    """Each part of `paths` that reads; the others skipped with their reason, for the caller to report."""
    tables, read, skipped = [], [], []
    for path in paths:
        try:
            tables.append(read_part(storage, path, columns))
            read.append(path)
        except _DAMAGE as exc:
            skipped.append(SkippedPart(path, _reason(exc)))
    return PartsRead(tables, read, skipped)


def read_tables(storage: Storage, folder: str, columns: list[str] | None = None) -> list[pa.Table]:
    """The readable parts of the table in `folder`; a damaged part is skipped and logged as a warning (once per
    process), for readers that have no user to tell directly (the LLM ledger's budget check, a flow)."""
    read = read_parts(storage, part_files(storage, folder), columns)
    log_skipped(read.skipped)
    return read.tables


def log_skipped(skipped: list[SkippedPart]) -> None:
    """A warning on the `ksci.lineage.parts` logger for each part not warned about yet in this process."""
    for part in skipped:
        if part.path not in _logged:
            _logged.add(part.path)
            _log.warning(part.warning())


def _reason(exc: BaseException) -> str:
    """The reader's error in one line (Arrow's messages can span several)."""
    message = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {message}"
