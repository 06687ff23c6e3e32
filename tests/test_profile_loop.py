"""The run's best kernel is profiled once at the end of the evolution (issue 29; tasks/profile.py profile_best,
called by flows/evolve.py). On this CPU host there is no profiler and no GPU: the profile is the value
"no profile: why", recorded as role "best" under the run's last generation, and the run goes on. A simulated run
records that it has no kernel to profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.shared_api import with_shared_api
from support.synthetic_lineage import write_synthetic_run

from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.store import LineageStore
from ksci.profile import run
from ksci.profile.store import read_profiles
from tasks.profile import profile_best

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_profiler(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setattr(run, "PLACES", {"ncu": (), "rocprofv3": ()})


def test_the_best_kernel_without_a_profiler_is_recorded_as_no_profile(tmp_path, no_profiler):
    root = write_synthetic_run(tmp_path / "store", "r", 3, 4, simulated=False)
    best = LineageStore(root).best("r")
    text = profile_best(EvaluationSetup("fp8_gemm", "cuda", str(root)), "r")
    assert text == "no profile: ncu is not installed on this host"
    (record,) = read_profiles(str(root), "r")
    assert (record.role, record.generation, record.candidate_id) == ("best", 2, best["candidate_id"])
    assert not record.ok and record.digest == text


def test_a_simulated_run_records_that_its_best_has_no_kernel(tmp_path):
    root = write_synthetic_run(tmp_path / "store", "sim", 2, 3, simulated=True)
    text = profile_best(EvaluationSetup("fp8_gemm", "cuda", str(root), simulate=""), "sim")
    assert text == "no profile: a simulated run has no kernel to profile"
    assert [r.role for r in read_profiles(str(root), "sim")] == ["best"]


def test_a_run_without_a_passing_kernel_has_nothing_to_profile(tmp_path):
    (tmp_path / "store").mkdir()
    assert profile_best(EvaluationSetup("fp8_gemm", "cuda", str(tmp_path / "store")), "empty") is None
    assert read_profiles(str(tmp_path / "store"), "empty") == []


def _evolve(api: str, store: Path, *extra: str) -> subprocess.CompletedProcess:
    """A simulated evolution on the test process's shared Prefect API (the profile is what is checked)."""
    command = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", "fp8_gemm", "--simulate", "--generations",
               "1", "--children", "2", "--run", "sim", "--store", str(store), *extra]  # fmt: skip
    env = with_shared_api(dict(os.environ), api)
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)


@pytest.mark.slow
def test_an_evolution_ends_with_the_best_kernels_profile_unless_told_not_to(tmp_path, shared_prefect_api):
    done = _evolve(shared_prefect_api, tmp_path / "profiled")
    assert done.returncode == 0, done.stderr[-3000:]
    roles = [(r.role, r.digest) for r in read_profiles(str(tmp_path / "profiled"), "sim")]
    assert ("best", "no profile: a simulated run has no kernel to profile") in roles
    skipped = _evolve(shared_prefect_api, tmp_path / "unprofiled", "--no-profile")
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    assert read_profiles(str(tmp_path / "unprofiled"), "sim") == []
