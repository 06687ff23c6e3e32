"""The lineage store: one Parquet row per evaluated candidate, plus content-addressed kernel sources.

Layout under the store's root (see docs/lineage-schema.md for the columns):

    <root>/<run>/candidates/part-<generation>-<uuid>.parquet   append-only, one file per append and generation
    <root>/sources/<id[:2]>/<id><suffix>                        write-once kernel sources

The root is a local folder or an fsspec URL (ksci.lineage.storage): every write goes to a hidden temp name and is then
published under its real name, so a crash leaves no partial file that a reader would see, and concurrent writers
(on one host or several sharing the store) never touch the same file. A part damaged afterwards (cut short, emptied)
is skipped with a warning naming it, and the other parts' rows still read (ksci.lineage.parts.read_parts).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ksci.evaluate.results import Status, Verdict
from ksci.evaluate.toolchain.compile import source_hash
from ksci.lineage.parts import (
    RESERVED_RUNS,
    SkippedPart,
    check_run,
    log_skipped,
    part_files,
    read_parts,
    to_pandas,
    write_part,
)
from ksci.lineage.storage import Storage
from ksci.problem.spec import shape_key

SCHEMA_VERSION = 2  # 2: kind, params_by_shape_json (composed candidates)
KEY = ("run", "candidate_id", "generation")  # a row is written at most once per key
PROPOSERS = ("seed", "tuning", "llm", "rebench")
KINDS = ("point", "composed", "custom")  # a template point, a per-shape composition of points, anything else
_VERSION_METADATA = b"ksci.lineage.store.schema_version"

SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int64(), nullable=False),
        pa.field("run", pa.string(), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string()),
        pa.field("reference_id", pa.string()),
        pa.field("proposer", pa.string(), nullable=False),
        pa.field("hypothesis", pa.string(), nullable=False),
        pa.field("template", pa.string()),
        pa.field("params_json", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("params_by_shape_json", pa.string()),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("target", pa.string(), nullable=False),
        pa.field("arch", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
        pa.field("compile_seconds", pa.float64()),
        pa.field("compile_cached", pa.bool_()),
        pa.field("registers", pa.int64()),
        pa.field("spill_bytes", pa.int64()),
        pa.field("shared_bytes", pa.int64()),
        pa.field("agprs", pa.int64()),
        pa.field("sgprs", pa.int64()),
        pa.field("scratch_bytes", pa.int64()),
        pa.field("occupancy", pa.int64()),
        pa.field("geomean_us", pa.float64()),
        pa.field("reference_geomean_us", pa.float64()),
        pa.field("vendor_geomean_us", pa.float64()),
        pa.field("speed_of_light_geomean_us", pa.float64()),
        pa.field("speedup_vs_reference", pa.float64()),
        pa.field("speedup_vs_vendor", pa.float64()),
        pa.field("shape_times_json", pa.string(), nullable=False),
        pa.field("shape_baselines_json", pa.string()),
        pa.field("gpu", pa.string()),
        pa.field("fingerprint_json", pa.string(), nullable=False),
        pa.field("llm_model", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("cost_usd", pa.float64()),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ],
    metadata={_VERSION_METADATA: str(SCHEMA_VERSION).encode()},
)


@dataclass(frozen=True)
class LineageRead:
    """What `LineageStore.read_lineage` found: the rows of the parts that read, and the parts skipped as damaged."""

    frame: pd.DataFrame
    skipped: list[SkippedPart]

    def warnings(self) -> list[str]:
        return [part.warning() for part in self.skipped]


class LineageVersionError(ValueError):
    """A part file written by a newer ksci (a schema version above ours)."""


@dataclass(frozen=True)
class LlmUsage:
    """What one LLM-written candidate cost."""

    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class CandidateMeta:
    """Where a candidate comes from, as its proposer (seed, tuning, LLM, rebench) says it: the one metadata type
    that every path hands to the record step, which adds the verdict, the source and its id."""

    run: str
    generation: int
    proposer: str
    hypothesis: str
    parent_id: str | None = None
    reference_id: str | None = None
    template: str | None = None
    params: dict | None = None
    params_by_shape: dict | None = None
    llm: LlmUsage | None = None


@dataclass(kw_only=True)
class Candidate:
    """One row of the lineage: an evaluated kernel, where it came from, and how it did."""

    schema_version: int = SCHEMA_VERSION
    run: str
    problem: str  # the kernels/<problem> this candidate solves
    generation: int
    candidate_id: str  # first 16 hex digits of ksci.evaluate.toolchain.compile.source_hash(source)
    parent_id: str | None = None
    reference_id: str | None = None
    proposer: str  # one of PROPOSERS, or another registered proposer's name (ksci.proposers.registry)
    hypothesis: str = ""
    template: str | None = None
    params_json: str | None = None  # json.dumps(params, sort_keys=True)
    kind: str | None = None  # one of KINDS; null in rows written before schema version 2 (see row_kind)
    params_by_shape_json: str | None = (
        None  # a composed candidate's plan (ksci.problem.compose), json.dumps(sort_keys=True)
    )
    source_path: str  # relative to the store's root
    target: str
    arch: str | None = None
    status: str  # a ksci.evaluate.results.Status value
    message: str = ""
    compile_seconds: float | None = None
    compile_cached: bool | None = None
    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None
    agprs: int | None = None  # AMD accumulation registers
    sgprs: int | None = None  # AMD scalar registers
    scratch_bytes: int | None = None  # stack frame (CUDA) / scratch per lane (AMD)
    occupancy: int | None = None  # waves per SIMD (AMD): the lowest over the source's kernels
    geomean_us: float | None = None
    reference_geomean_us: float | None = None
    vendor_geomean_us: float | None = None
    speed_of_light_geomean_us: float | None = None
    speedup_vs_reference: float | None = None
    speedup_vs_vendor: float | None = None
    shape_times_json: str = "{}"  # {shape_key: median_us}
    # {shape_key: {"vendor_us", "reference_us"}}: the baselines timed beside it, for the per-shape standing
    # (ksci.profile.standing); null in rows written before the column (nullable, so no version change).
    shape_baselines_json: str | None = None
    gpu: str | None = None
    fingerprint_json: str = "{}"
    llm_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def candidate_id_of(source: str) -> str:
    return source_hash(source)[:16]


def params_to_json(params: dict | None) -> str | None:
    return None if params is None else json.dumps(params, sort_keys=True)


def candidate_from_verdict(verdict: Verdict, meta: CandidateMeta, source_path: str, candidate_id: str) -> Candidate:
    """The lineage row of an evaluated candidate: where it came from (`meta`), its verdict, its stored source."""
    compiled = verdict.compile
    resources = compiled.resources if compiled else []
    shape_times = {shape_key(t.shape): t.kernel.median_us for t in verdict.timings if t.kernel}
    llm = meta.llm
    return Candidate(
        run=meta.run,
        problem=verdict.problem,
        generation=meta.generation,
        candidate_id=candidate_id,
        parent_id=meta.parent_id,
        reference_id=meta.reference_id,
        proposer=meta.proposer,
        hypothesis=meta.hypothesis,
        template=meta.template,
        params_json=params_to_json(meta.params),
        kind="composed" if meta.params_by_shape else "point" if meta.template else "custom",
        params_by_shape_json=params_to_json(meta.params_by_shape),
        source_path=source_path,
        target=verdict.target,
        arch=compiled.arch if compiled else verdict.fingerprint.get("gpu_arch"),
        status=str(Status(verdict.status)),
        message=verdict.message,
        compile_seconds=compiled.seconds if compiled else None,
        compile_cached=compiled.cached if compiled else None,
        registers=_max_of(r.registers for r in resources),
        spill_bytes=_max_of(r.spill_bytes for r in resources),
        shared_bytes=_max_of(r.shared_bytes for r in resources),
        agprs=_max_of(r.agprs for r in resources),
        sgprs=_max_of(r.sgprs for r in resources),
        scratch_bytes=_max_of(r.stack_or_scratch_bytes for r in resources),
        occupancy=min((r.occupancy for r in resources if r.occupancy is not None), default=None),
        geomean_us=verdict.geomean_us,
        reference_geomean_us=verdict.reference_geomean_us,
        vendor_geomean_us=verdict.vendor_geomean_us,
        speed_of_light_geomean_us=verdict.speed_of_light_geomean_us,
        speedup_vs_reference=verdict.speedup_vs_reference,
        speedup_vs_vendor=verdict.speedup_vs_vendor,
        shape_times_json=json.dumps(shape_times, sort_keys=True),
        shape_baselines_json=json.dumps(_shape_baselines(verdict), sort_keys=True),
        gpu=verdict.fingerprint.get("gpu"),
        fingerprint_json=json.dumps(verdict.fingerprint, sort_keys=True, default=str),
        llm_model=llm.model if llm else None,
        prompt_tokens=llm.prompt_tokens if llm else None,
        completion_tokens=llm.completion_tokens if llm else None,
        cost_usd=llm.cost_usd if llm else None,
    )


def shape_times(text) -> dict[str, float]:
    """A row's shape_times_json (shape key -> median us) as a dict; {} where the row has none (a failure, a
    simulated row of an older store, a missing column's NaN)."""
    return json.loads(text) if isinstance(text, str) and text else {}


def row_kind(row: pd.Series) -> str:
    """The row's kind; rows written before the column existed are points when they name a template."""
    kind = row.get("kind")
    if isinstance(kind, str):
        return kind
    return "point" if isinstance(row.get("template"), str) else "custom"


def candidate_from_row(row: pd.Series) -> Candidate:
    """The inverse of writing: a row of `LineageStore.read()` back as a Candidate (nulls become None)."""
    values = {}
    for f in fields(Candidate):
        value = row.get(f.name)
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            value = None
        elif isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
        elif hasattr(value, "item"):  # numpy scalar -> Python scalar
            value = value.item()
        values[f.name] = value
    return Candidate(**values)


def empty_frame() -> pd.DataFrame:
    return to_pandas(SCHEMA.empty_table())


class LineageStore:
    """The store at a local folder or an fsspec URL (see ksci.lineage.storage); several hosts may write to one."""

    def __init__(self, root: str | Path) -> None:
        self.storage = Storage(root)
        self.root = self.storage.url

    def put_source(self, source: str, suffix: str) -> str:
        """Store a kernel source under its id; returns the path relative to the root. Write-once."""
        cid = candidate_id_of(source)
        relative = f"sources/{cid[:2]}/{cid}{suffix}"
        path = self.storage.path(relative)
        if not self.storage.exists(path):
            self.storage.write_atomic(path, lambda f: f.write(source.encode()))
        return relative

    def read_source(self, relative: str) -> str:
        return self.storage.read_bytes(self.storage.path(relative)).decode()

    def append(self, rows: list[Candidate]) -> int:
        """Write the rows not yet stored (by run, candidate_id, generation); returns how many were written."""
        fresh, keys = [], set()
        known = {run: self._keys(run) for run in {r.run for r in rows}}
        for row in rows:
            key = (row.run, row.candidate_id, row.generation)
            if key in known[row.run] or key in keys:
                continue
            keys.add(key)
            fresh.append(row)
        groups: dict[tuple[str, int], list[Candidate]] = {}
        for row in fresh:
            groups.setdefault((row.run, row.generation), []).append(row)
        for (run, generation), group in sorted(groups.items()):
            table = pa.Table.from_pylist([asdict(r) for r in group], schema=SCHEMA)
            write_part(self.storage, self._run_dir(run), generation, table)
        return len(fresh)

    def read(self, run: str | None = None) -> pd.DataFrame:
        """Every stored row (of one run, or of all), oldest first; an empty frame with the schema's columns if none.
        A damaged part is skipped and logged as a warning; read_lineage hands the skipped parts to the caller."""
        lineage = self.read_lineage(run)
        log_skipped(lineage.skipped)
        return lineage.frame

    def read_lineage(self, run: str | None = None) -> LineageRead:
        """The rows of every part that reads (as `read`), and the parts that did not, for the caller to report."""
        runs = [run] if run is not None else self.runs()
        parts = read_parts(self.storage, [p for r in runs for p in self._parts(r)])
        tables = [_conform(t, p) for t, p in zip(parts.tables, parts.paths, strict=True)]
        if not tables:
            return LineageRead(empty_frame(), parts.skipped)
        frame = to_pandas(pa.concat_tables(tables))
        frame = frame.sort_values(["run", "generation", "created_at", "candidate_id"], kind="stable")
        # Two writers racing on the same row can both publish it; readers keep the first.
        frame = frame.drop_duplicates(subset=list(KEY), keep="first").reset_index(drop=True)
        return LineageRead(frame, parts.skipped)

    def runs(self) -> list[str]:
        names = self.storage.folders(self.storage.root)
        return [n for n in names if n not in RESERVED_RUNS and self.storage.exists(self.storage.path(n, "candidates"))]

    def best(self, run: str) -> pd.Series | None:
        """The row with the lowest geomean among candidates whose status is ok (ties: smallest candidate_id)."""
        ranked = self.ranked(run)
        return None if ranked.empty else ranked.iloc[0]

    def ranked(self, run: str, top: int | None = None) -> pd.DataFrame:
        """The candidates whose status is ok, fastest first by geomean (ties: smallest candidate_id); `top`: the
        first that many."""
        frame = self.read(run)
        ok = frame[(frame["status"] == str(Status.OK)) & frame["geomean_us"].notna()]
        ranked = ok.sort_values(["geomean_us", "candidate_id"], kind="stable")
        return ranked if top is None else ranked.head(top)

    def generations(self, run: str) -> int:
        """How many generations the run has: one more than the highest generation number (0 when empty)."""
        frame = self.read(run)
        return 0 if frame.empty else int(frame["generation"].max()) + 1

    def _run_dir(self, run: str) -> str:
        check_run(run)
        return self.storage.path(run, "candidates")

    def _parts(self, run: str) -> list[str]:
        return part_files(self.storage, self._run_dir(run))

    def _keys(self, run: str) -> set[tuple[str, str, int]]:
        """The keys already stored; a damaged part's rows count as not stored, so an append writes them again."""
        keys = set()
        parts = read_parts(self.storage, self._parts(run), list(KEY))
        log_skipped(parts.skipped)
        for table in parts.tables:
            columns = table.to_pydict()
            keys.update(zip(*(columns[k] for k in KEY), strict=True))
        return keys


def _shape_baselines(verdict: Verdict) -> dict:
    """Per shape, the vendor library's and the reference's median time measured beside the candidate."""
    return {
        shape_key(t.shape): {
            "vendor_us": t.vendor.median_us if t.vendor else None,
            "reference_us": t.reference.median_us if t.reference else None,
        }
        for t in verdict.timings
    }


def _max_of(values) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _conform(table: pa.Table, path: object) -> pa.Table:
    """Bring a part file of this or an older schema version to the current schema (missing columns as null)."""
    metadata = table.schema.metadata or {}
    version = int(metadata.get(_VERSION_METADATA, b"1"))
    if version > SCHEMA_VERSION:
        raise LineageVersionError(
            f"{path}: lineage schema version {version} is newer than this ksci's ({SCHEMA_VERSION}); upgrade ksci"
        )
    columns = []
    for f in SCHEMA:
        if f.name in table.column_names:
            columns.append(table[f.name].cast(f.type))
        elif f.name == "schema_version":
            columns.append(pa.array([version] * table.num_rows, f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    # Missing columns of old files are null even where today's schema says non-null, hence a relaxed schema.
    relaxed = pa.schema([f.with_nullable(True) for f in SCHEMA], metadata=SCHEMA.metadata)
    return pa.Table.from_arrays(columns, schema=relaxed)
