"""benchmarks/evolution_result.py on CPU, before it touches a GPU: a run the store does not hold is named in a one-line
error that lists the runs it does hold (on a fresh device machine the store of an earlier call is gone, and the script
used to fail with pandas' IndexError)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(store: Path, run: str) -> subprocess.CompletedProcess:
    script = ROOT / "benchmarks" / "evolution_result.py"
    return subprocess.run(
        [sys.executable, str(script), "--store", str(store), "--run", run], capture_output=True, text=True, cwd=ROOT
    )


def test_a_missing_run_is_named_with_the_runs_the_store_holds(tmp_path):
    result = _run(tmp_path, "throughput-kmajor")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "no candidates of run 'throughput-kmajor'" in result.stderr
    assert "runs there: none" in result.stderr
