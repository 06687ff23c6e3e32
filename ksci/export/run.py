"""Export one candidate of a run: choose it (ksci.export.source), build its libraries (ksci.export.build), write
the package (ksci.export.package). ExportRefused says in one line why nothing was written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ksci.export.build import build_libraries, stand_in
from ksci.export.package import Origin, write_package
from ksci.export.source import EXIT_BAD_INPUT, ExportRefused, chosen_row
from ksci.lineage.storage import check_store_root
from ksci.lineage.store import LineageStore
from ksci.problem.spec import ProblemError, load_problem


@dataclass(frozen=True)
class Exported:
    folder: Path
    summary: str


def export_run(
    store_root: str | Path,
    run: str,
    candidate: str | None = None,
    output: Path | None = None,
    archs: list[str] | None = None,
    test_stand_in: bool = False,
) -> Exported:
    """The package of the candidate in `output`. `test_stand_in`: build no library, the op computes with
    reference.py (ksci's CPU tests; the package says so everywhere)."""
    if problem := check_store_root(store_root, write=False):
        raise ExportRefused(problem)
    store = LineageStore(store_root)
    row = chosen_row(store, run, candidate)
    try:
        problem = load_problem(str(row["problem"]))
    except ProblemError as exc:
        raise ExportRefused(str(exc)) from None
    output = Path(output or f"ksci_{problem.name}")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ExportRefused(f"{output} exists and is not an empty folder; name another with -o", EXIT_BAD_INPUT)
    if output.is_dir():
        output.rmdir()
    source = store.read_source(str(row["source_path"]))
    target = str(row["target"])
    wanted = archs or [a for a in [row.get("arch")] if isinstance(a, str) and a]
    if not wanted and not test_stand_in:
        raise ExportRefused(f"candidate {row['candidate_id']} records no architecture; name one with --arch")
    built = stand_in(source) if test_stand_in else build_libraries(problem, source, target, wanted)
    written = write_package(problem, Origin(run, str(store.root), row), source, built, output)
    what = ", ".join(built.libraries) or "no library: test stand-in"
    return Exported(written, f"{problem.name} candidate {row['candidate_id']}, {row['status']}, built for {what}")
