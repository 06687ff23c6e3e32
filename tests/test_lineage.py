"""The lineage store: round trip, atomic and idempotent appends, concurrent writers, schema documentation."""

from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ksci import PROJECT_ROOT
from ksci.evaluate.results import CompileResult, KernelResources, ShapeTiming, Status, Timing, Verdict
from ksci.lineage.store import (
    SCHEMA,
    SCHEMA_VERSION,
    Candidate,
    CandidateMeta,
    LineageStore,
    LineageVersionError,
    LlmUsage,
    candidate_from_row,
    candidate_from_verdict,
    candidate_id_of,
)


def make_candidate(run: str = "r1", generation: int = 0, n: int = 0, **overrides) -> Candidate:
    values = dict(
        run=run,
        problem="fp8_gemm",
        generation=generation,
        candidate_id=f"{n:016x}",
        proposer="tuning",
        hypothesis=f"candidate {n}",
        template="mma",
        params_json=json.dumps({"BN": 64 + n}, sort_keys=True),
        source_path=f"sources/00/{n:016x}.cu",
        target="cuda",
        status="ok",
        geomean_us=100.0 + n,
        created_at=datetime(2025, 1, 1, 12, 0, n % 60, tzinfo=UTC),
    )
    values.update(overrides)
    return Candidate(**values)


def full_candidate() -> Candidate:
    """A row with every column set, to check that each type survives the round trip."""
    return Candidate(
        run="full",
        problem="fp8_gemm",
        generation=3,
        candidate_id="0123456789abcdef",
        parent_id="fedcba9876543210",
        reference_id="00112233aabbccdd",
        proposer="llm",
        hypothesis="double-buffer the B tile",
        template=None,
        params_json=None,
        source_path="sources/01/0123456789abcdef.cu",
        target="cuda",
        arch="sm_90a",
        status="ok",
        message="",
        compile_seconds=12.5,
        compile_cached=False,
        registers=128,
        spill_bytes=0,
        shared_bytes=49152,
        geomean_us=812.25,
        reference_geomean_us=2000.0,
        vendor_geomean_us=700.0,
        speed_of_light_geomean_us=300.0,
        speedup_vs_reference=2000.0 / 812.25,
        speedup_vs_vendor=700.0 / 812.25,
        shape_times_json='{"1024x1536x7168": 800.0}',
        gpu="NVIDIA H100",
        fingerprint_json='{"gpu": "NVIDIA H100"}',
        llm_model="some-model",
        prompt_tokens=1234,
        completion_tokens=567,
        cost_usd=0.0123,
        created_at=datetime(2025, 6, 1, 8, 30, 15, 123456, tzinfo=UTC),
    )


def test_round_trip_preserves_values_and_types(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    sparse = make_candidate(run="full", generation=3, n=1)  # most optional columns None
    assert store.append([full_candidate(), sparse]) == 2
    frame = store.read("full")
    assert list(frame.columns) == SCHEMA.names
    assert candidate_from_row(frame.iloc[0]) == sparse  # oldest first
    assert candidate_from_row(frame.iloc[1]) == full_candidate()
    assert frame["generation"].dtype == pd.Int64Dtype()
    assert frame["registers"].dtype == pd.Int64Dtype()  # stays integer despite a null
    assert frame["compile_cached"].dtype == pd.BooleanDtype()
    assert frame["geomean_us"].dtype == "float64"
    assert str(frame["created_at"].dtype) == "datetime64[us, UTC]"
    assert pq.read_schema(next((tmp_path / "full" / "candidates").glob("part-*.parquet"))).equals(SCHEMA)


def test_empty_store_reads_typed_empty_frame(tmp_path: Path) -> None:
    store = LineageStore(tmp_path / "nothing-yet")
    frame = store.read()
    assert frame.empty and list(frame.columns) == SCHEMA.names
    assert frame["registers"].dtype == pd.Int64Dtype()
    assert store.runs() == [] and store.best("r1") is None and store.generations("r1") == 0


def test_runs_best_generations(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    store.append([make_candidate("a", 0, 1, geomean_us=50.0), make_candidate("a", 0, 2, geomean_us=40.0)])
    store.append([make_candidate("a", 2, 3, geomean_us=10.0, status="wrong")])
    store.append([make_candidate("b", 0, 4, geomean_us=None, status="compile_error")])
    store.put_source("// a kernel", ".cu")  # sources/ is not a run
    assert store.runs() == ["a", "b"]
    assert store.best("a")["candidate_id"] == f"{2:016x}"  # the faster "wrong" one does not count
    assert store.best("b") is None
    assert store.generations("a") == 3 and store.generations("b") == 1
    assert len(store.read()) == 4


def test_put_source_is_content_addressed_and_write_once(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    source = 'extern "C" int f() { return 0; }\n'
    relative = store.put_source(source, ".cu")
    cid = candidate_id_of(source)
    assert relative == f"sources/{cid[:2]}/{cid}.cu"
    assert store.read_source(relative) == source
    assert store.put_source(source, ".cu") == relative and store.read_source(relative) == source
    # Other comments: another text, so another id (a comment can change the program: ksci.evaluate.toolchain.compile); both stay.
    other = store.put_source("// note \\\n" + source, ".cu")
    assert other != relative and store.read_source(other) == "// note \\\n" + source
    assert store.read_source(relative) == source
    assert not list(tmp_path.rglob("*.tmp"))


def test_append_is_idempotent(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    rows = [make_candidate(n=i) for i in range(5)]
    assert store.append(rows) == 5
    assert store.append(rows) == 0
    assert store.append(rows + [make_candidate(n=5)]) == 1
    assert store.append([make_candidate(n=6), make_candidate(n=6)]) == 1  # duplicates within one batch
    assert store.append([make_candidate(generation=1, n=0)]) == 1  # same kernel, later generation: a new row
    assert len(store.read("r1")) == 8
    assert len(list((tmp_path / "r1" / "candidates").glob("part-*.parquet"))) == 4


def test_leftover_temp_file_is_ignored(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    store.append([make_candidate(n=1)])
    folder = tmp_path / "r1" / "candidates"
    (folder / ".part-000000-deadbeef.parquet.0123.tmp").write_bytes(b"PAR1 half a file")
    assert len(store.read()) == 1
    assert store.append([make_candidate(n=2)]) == 1
    assert len(store.read()) == 2


def _crash_during_append(root: str) -> None:
    """Append in a child that dies (os._exit) after writing the temp file and before publishing it."""
    import os

    import ksci.lineage.storage

    def die(*args) -> None:
        os._exit(3)

    ksci.lineage.storage.os.replace = die
    LineageStore(root).append([make_candidate(n=7)])


def test_append_after_a_crash(tmp_path: Path) -> None:
    store = LineageStore(tmp_path)
    store.append([make_candidate(n=1)])
    child = multiprocessing.get_context("spawn").Process(target=_crash_during_append, args=(str(tmp_path),))
    child.start()
    child.join(60)
    assert child.exitcode == 3
    folder = tmp_path / "r1" / "candidates"
    assert len(list(folder.glob(".*.tmp"))) == 1  # the crash left a fully written but unpublished temp file
    assert list(store.read()["candidate_id"]) == [f"{1:016x}"]
    assert store.append([make_candidate(n=7)]) == 1  # the lost row can be written again
    assert sorted(store.read()["candidate_id"]) == [f"{1:016x}", f"{7:016x}"]


def test_failed_publish_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LineageStore(tmp_path)

    def refuse(*args) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("ksci.lineage.storage.os.replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        store.append([make_candidate(n=1)])
    monkeypatch.undo()
    assert not list(tmp_path.rglob("*.tmp")) and store.read().empty
    assert store.append([make_candidate(n=1)]) == 1


def _append_many(root: str, worker: int) -> None:
    store = LineageStore(root)
    for batch in range(5):
        rows = [make_candidate("shared", 0, 1000 * worker + 4 * batch + i) for i in range(4)]
        assert store.append(rows) == 4


@pytest.mark.slow  # four spawned interpreters import pandas and pyarrow
@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_concurrent_appends_lose_nothing(tmp_path: Path, as_url: bool) -> None:
    root = tmp_path.as_uri() if as_url else str(tmp_path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(root, w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    frame = LineageStore(tmp_path).read("shared")
    assert len(frame) == 80 and frame["candidate_id"].is_unique
    assert not list(tmp_path.rglob("*.tmp"))


def test_older_files_read_with_missing_columns_as_null(tmp_path: Path) -> None:
    folder = tmp_path / "old" / "candidates"
    folder.mkdir(parents=True)
    row = {"run": "old", "generation": 0, "candidate_id": "aa" * 8, "status": "ok", "geomean_us": 5.0}
    pq.write_table(pa.Table.from_pylist([row]), folder / "part-000000-0.parquet")  # no version metadata: v1
    frame = LineageStore(tmp_path).read("old")
    assert frame.loc[0, "geomean_us"] == 5.0 and frame.loc[0, "schema_version"] == 1
    assert pd.isna(frame.loc[0, "gpu"]) and frame["registers"].dtype == pd.Int64Dtype()


def test_newer_files_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "candidates"
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist([{"run": "new"}]).replace_schema_metadata(
        {b"ksci.lineage.store.schema_version": str(SCHEMA_VERSION + 1).encode()}
    )
    pq.write_table(table, folder / "part-000000-0.parquet")
    with pytest.raises(LineageVersionError, match="newer"):
        LineageStore(tmp_path).read("new")


def test_bad_run_names_are_refused(tmp_path: Path) -> None:
    for run in ("", "sources", "../up", "a/b", ".hidden"):
        with pytest.raises(ValueError, match="run name"):
            LineageStore(tmp_path).append([make_candidate(run=run)])


def test_candidate_from_verdict() -> None:
    compiled = CompileResult(
        ok=True,
        target="cuda",
        arch="sm_90a",
        toolchain="nvcc 12.8",
        command=["nvcc"],
        log="",
        resources=[
            KernelResources("k1", registers=96, spill_bytes=None, shared_bytes=16384),
            KernelResources("k2", registers=168, spill_bytes=8, shared_bytes=None),
        ],
        seconds=3.5,
        cached=True,
    )
    timings = [
        ShapeTiming({"m": 1024, "n": 512, "k": 256, "seed": 1}, Timing(10.0, 0.1, 9.9, 50)),
        ShapeTiming({"m": 2048, "n": 512, "k": 256, "seed": 2}, Timing(40.0, 0.2, 39.0, 50)),
        ShapeTiming({"m": 64, "n": 64, "k": 128, "seed": 3}, None),
    ]
    verdict = Verdict(
        Status.OK,
        "fp8_gemm",
        "cuda",
        compile=compiled,
        timings=timings,
        geomean_us=20.0,
        reference_geomean_us=60.0,
        vendor_geomean_us=15.0,
        fingerprint={"gpu": "NVIDIA H100", "driver": "570"},
    )
    meta = CandidateMeta(
        run="r",
        generation=2,
        parent_id="cd" * 8,
        reference_id=None,
        proposer="llm",
        hypothesis="wider tiles",
        template="mma",
        params={"BN": 128, "BM": 64},
        llm=LlmUsage("model-x", 100, 20, 0.5),
    )
    row = candidate_from_verdict(verdict, meta, "sources/ab/abc.cu", "ab" * 8)
    assert (row.registers, row.spill_bytes, row.shared_bytes) == (168, 8, 16384)
    assert json.loads(row.shape_times_json) == {"1024x512x256": 10.0, "2048x512x256": 40.0}
    assert row.params_json == '{"BM": 64, "BN": 128}'
    assert row.status == "ok" and row.arch == "sm_90a" and row.gpu == "NVIDIA H100"
    assert row.speedup_vs_reference == 3.0 and row.speedup_vs_vendor == 0.75
    assert (row.compile_seconds, row.compile_cached) == (3.5, True)
    assert (row.llm_model, row.prompt_tokens, row.completion_tokens, row.cost_usd) == ("model-x", 100, 20, 0.5)
    assert row.created_at.tzinfo is not None and row.schema_version == SCHEMA_VERSION

    failed = candidate_from_verdict(
        Verdict(Status.COMPILE_ERROR, "fp8_gemm", "rocm", message="error: x"),
        CandidateMeta(run="r", generation=0, proposer="seed", hypothesis=""),
        "s",
        "ef" * 8,
    )
    assert failed.status == "compile_error" and failed.registers is None and failed.shape_times_json == "{}"
    assert failed.llm_model is None and failed.compile_seconds is None


DOC_TYPES = {
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "timestamp[us, UTC]": pa.timestamp("us", tz="UTC"),
}


def test_schema_doc_lists_every_column_in_order() -> None:
    doc = (PROJECT_ROOT / "docs" / "lineage-schema.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \| (yes|no) \|", doc, flags=re.M)
    assert [name for name, _, _ in rows] == SCHEMA.names == [f.name for f in fields(Candidate)]
    for name, type_text, nullable in rows:
        field = SCHEMA.field(name)
        assert DOC_TYPES[type_text] == field.type, name
        assert (nullable == "yes") == field.nullable, name


def test_store_on_an_fsspec_url_that_is_not_local() -> None:
    """memory:// stands in for an object store: writes publish by the file system's move, not os.replace."""
    root = f"memory://ksci-test-{uuid.uuid4().hex}/runs"
    store = LineageStore(root)
    assert not store.storage.local and store.runs() == [] and store.read().empty
    path = store.put_source("__global__ void k() {}", ".cu")
    assert store.read_source(path) == "__global__ void k() {}"
    with ThreadPoolExecutor(max_workers=4) as pool:
        written = list(
            pool.map(lambda w: store.append([make_candidate("shared", 0, 100 * w + i) for i in range(5)]), range(4))
        )
    assert written == [5, 5, 5, 5]
    assert store.append([make_candidate("shared", 0, 0)]) == 0  # idempotent across the URL too
    frame = LineageStore(root).read("shared")
    assert len(frame) == 20 and frame["candidate_id"].is_unique and store.runs() == ["shared"]
    assert not [p for p in store.storage.fs.find(store.storage.root) if p.endswith(".tmp")]


def test_an_empty_store_location_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        LineageStore("")


def test_reading_a_part_starts_no_arrow_thread(tmp_path: Path) -> None:
    """ksci.lineage.parts.read_part parses the bytes in the caller's thread: an Arrow IO thread left holding a
    Python buffer aborts the process at exit. Counted in a fresh interpreter, where Arrow has started no pool yet
    (reading the file object with pq.ParquetFile itself starts one thread)."""
    LineageStore(tmp_path).append([make_candidate("threads", 0, n) for n in range(3)])
    script = f"""
import os
from ksci.lineage.parts import part_files, read_parts
from ksci.lineage.store import LineageStore
storage = LineageStore({str(tmp_path)!r}).storage
before = len(os.listdir("/proc/self/task"))
read = read_parts(storage, part_files(storage, storage.path("threads", "candidates")))
print(sum(t.num_rows for t in read.tables), before, len(os.listdir("/proc/self/task")))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    rows, before, after = map(int, out.stdout.split())
    assert rows == 3 and after == before, out.stdout
