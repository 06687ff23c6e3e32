"""The runs of a lineage store in one line each, for `ksci runs`: what a user looks for before `ksci status --run` or
`ksci report --run` (which run is which problem and target, whether its numbers were measured, how far it got).

Read part by part rather than through LineageStore.read: one damaged part (a crash of a foreign writer, a copy cut
short) must not hide every other run, so a part that cannot be read is skipped and named in a warning instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

import pandas as pd

from ksci.backends.simulated import is_simulated
from ksci.evaluate.results import Status
from ksci.lineage.identity import read_identity
from ksci.lineage.parts import part_files, read_parts, to_pandas
from ksci.lineage.store import KEY, LineageStore

_COLUMNS = [*KEY, "problem", "target", "status", "geomean_us", "speedup_vs_vendor", "gpu", "fingerprint_json"]


@dataclass(frozen=True)
class RunSummary:
    """One run as `ksci runs` lists it. best_us and its vendor ratio come from the fastest ok row (None if none)."""

    name: str
    problem: str
    target: str
    simulated: bool  # its timings were made up or replayed by the simulator, not measured
    candidates: int
    best_us: float | None
    vendor_ratio: float | None  # the vendor library's geomean over the best's: above 1, the best beats it
    last_time: datetime | None  # the newest row's created_at

    def to_dict(self) -> dict:
        row = asdict(self)
        row["last_time"] = self.last_time.isoformat() if self.last_time else None
        return row


@dataclass(frozen=True)
class RunListing:
    """The runs that could be read, and a warning for each part that could not."""

    runs: list[RunSummary]
    warnings: list[str]


def list_runs(store: LineageStore) -> RunListing:
    """Every run of the store with at least one readable row, by name; the reserved `sources` folder and folders
    without a candidates table are not runs (LineageStore.runs)."""
    summaries, warnings = [], []
    for run in store.runs():
        frame = _read_rows(store, run, warnings)
        if not frame.empty:
            summaries.append(_summarize(run, frame))
    return RunListing(summaries, warnings)


def _read_rows(store: LineageStore, run: str, warnings: list[str]) -> pd.DataFrame:
    storage = store.storage
    parts = read_parts(storage, part_files(storage, storage.path(run, "candidates")))
    warnings.extend(part.warning() for part in parts.skipped)
    frames = []
    for path, table in zip(parts.paths, parts.tables, strict=True):
        if "created_at" not in table.column_names:  # a foreign Parquet file in the run's folder
            warnings.append(f"skipped {path}: not a lineage part (no created_at column)")
            continue
        present = [c for c in _COLUMNS if c in table.column_names]
        frames.append(to_pandas(table.select(present + ["created_at"])))
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    return frame.drop_duplicates(subset=list(KEY), keep="first")


def _summarize(run: str, frame: pd.DataFrame) -> RunSummary:
    ok = frame[(frame["status"] == str(Status.OK)) & frame["geomean_us"].notna()]
    best = ok.sort_values(["geomean_us", "candidate_id"], kind="stable").iloc[0] if not ok.empty else None
    vendor = best.get("speedup_vs_vendor") if best is not None else None
    last = frame["created_at"].max()
    return RunSummary(
        name=run,
        problem=str(frame["problem"].iloc[0]),
        target=str(frame["target"].iloc[0]),
        simulated=any(is_simulated(row) for _, row in frame.iterrows()),
        candidates=len(frame),
        best_us=float(best["geomean_us"]) if best is not None else None,
        vendor_ratio=None if vendor is None or pd.isna(vendor) else float(vendor),
        last_time=None if pd.isna(last) else last.to_pydatetime(),
    )


def format_runs(listing: RunListing, where: str) -> str:
    """A table of the runs, a header and one line each; one line saying there are none if so."""
    if not listing.runs:
        return f"no runs in {where}"
    header = ("run", "problem", "target", "timings", "candidates", "best", "against the vendor", "last row (UTC)")
    rows = [header] + [_cells(s) for s in listing.runs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _cells(summary: RunSummary) -> tuple[str, ...]:
    return (
        summary.name,
        summary.problem,
        summary.target,
        "simulated" if summary.simulated else "measured",
        str(summary.candidates),
        "-" if summary.best_us is None else f"{summary.best_us:.2f} us" + (" (sim)" if summary.simulated else ""),
        _against_vendor(summary.vendor_ratio),
        summary.last_time.strftime("%Y-%m-%d %H:%M") if summary.last_time else "-",
    )


def _against_vendor(ratio: float | None) -> str:
    """The one convention of gains: 1.05x faster, or 4.93x slower where the vendor library wins."""
    if ratio is None or ratio <= 0:
        return "-"
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def not_a_run(store: LineageStore, run: str) -> str:
    """Why `run` has no rows to show: started but with nothing recorded yet (started_without_rows), or unknown."""
    known = ", ".join(store.runs()) or "none"
    return started_without_rows(store, run) or f"no run {run!r} in {store.root} (runs there: {known})"


def started_without_rows(store: LineageStore, run: str) -> str | None:
    """For a run that started (its identity.json is written before the flow) and was stopped before its first
    candidate was recorded, a line saying so and how to continue it; None for any other name."""
    if run in store.runs():
        return None
    try:
        identity = read_identity(store, run)
    except ValueError:
        return None
    if identity is None:
        return None
    return (
        f"run {run} ({identity.summary()}): no candidate recorded yet, it was stopped before its first one; "
        f"continue it with ksci evolve --run {run}"
    )
