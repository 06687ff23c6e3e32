"""Which candidate an export takes, and the refusals: a run that does not exist, a simulated run, a candidate that is
not `ok`. Each refusal is an ExportRefused with one line and its exit code (2: bad input)."""

from __future__ import annotations

import pandas as pd

from ksci.backends.simulated import is_simulated
from ksci.evaluate.results import Status
from ksci.lineage.store import LineageStore

EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED = 2, 3, 1


class ExportRefused(Exception):
    """Why nothing was exported: one line, and the exit code (2 bad input, 3 environment, 1 the kernel failed)."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def chosen_row(store: LineageStore, run: str, candidate: str | None) -> pd.Series:
    """The candidate's lineage row (by id or a unique prefix of one; default: the run's best ok candidate)."""
    if run not in store.runs():
        known = ", ".join(store.runs()) or "none"
        raise ExportRefused(f"no run {run!r} in {store.root} (runs there: {known})")
    frame = store.read(run)
    if any(is_simulated(row) for _, row in frame.iterrows()):
        raise ExportRefused(
            f"run {run!r} is simulated: its timings were made up or replayed, and no kernel of it was verified on a "
            "GPU; export a measured run"
        )
    if candidate is None:
        best = store.best(run)
        if best is None:
            raise ExportRefused(f"run {run!r} has no ok candidate to export")
        return best
    rows = frame[frame["candidate_id"].str.startswith(candidate)]
    ids = sorted(set(rows["candidate_id"]))
    if not ids:
        raise ExportRefused(f"run {run!r} has no candidate {candidate!r}")
    if len(ids) > 1:
        raise ExportRefused(f"candidate {candidate!r} is ambiguous in run {run!r}: {', '.join(ids[:4])}")
    ok = rows[rows["status"] == str(Status.OK)]
    if ok.empty:
        status = rows.iloc[-1]["status"]
        raise ExportRefused(
            f"candidate {ids[0]} of run {run!r} is {status}, not ok: only a kernel that passed verification is exported"
        )
    return ok.sort_values("geomean_us", kind="stable").iloc[0]
