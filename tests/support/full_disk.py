"""An append to a lineage store by a process whose files may not grow past 2 KiB (RLIMIT_FSIZE, the OS's own "file
too large", EFBIG): a full disk as the store meets it. Used by tests/test_faults.py and scripts/count_exit_aborts.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAILED_EXIT = 17  # the process's exit status once the append has raised OSError, as it should


def rows(count: int, generation: int = 0):
    """`count` ok candidates of run "full" in `generation`."""
    from ksci.evaluate.results import Status, Verdict
    from ksci.lineage.store import CandidateMeta, candidate_from_verdict

    return [
        candidate_from_verdict(
            Verdict(Status.OK, "fp8_gemm", "cuda", geomean_us=100.0 + i),
            CandidateMeta(
                run="full", generation=generation, proposer="seed", hypothesis="h", template="naive", params={"i": i}
            ),
            f"sources/00/{i:016x}.cu",
            f"{generation:08x}{i:08x}",
        )
        for i in range(count)
    ]


def append_on_a_full_disk(store: Path, count: int = 5, generation: int = 1) -> subprocess.CompletedProcess:
    """Append `count` rows of `generation` to the store at `store` from a fresh interpreter whose file size limit
    is smaller than any Parquet part file. It exits FAILED_EXIT after printing the OSError, which the append must
    raise; any other status (a crash, an abort at exit) is the caller's to report."""
    script = textwrap.dedent(f"""
        import resource, sys
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
        from support.full_disk import rows
        from ksci.lineage.store import LineageStore
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))  # smaller than any Parquet part file
        try:
            LineageStore({str(store)!r}).append(rows({count}, generation={generation}))
        except OSError as exc:
            print("append failed:", exc)
            sys.exit({FAILED_EXIT})
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
