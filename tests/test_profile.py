"""The profile package on CPU: ncu's and rocprofv3's CSV (recorded and hand-written samples, tests/data/profile/)
parsed into the typed record, the digest's fixed lines, and every way of having no profile as a value."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ksci.profile import ncu, rocprof, run
from ksci.profile.digest import digest, roofline_class
from ksci.profile.result import ProfileResult
from ksci.profile.run import ProfileRequest, profile_library

DATA = Path(__file__).parent / "data" / "profile"


def ncu_kernels(name: str):
    return ncu.kernel_profiles(ncu.read_launches((DATA / name).read_text()))


def test_recorded_ncu_details_page_parses_into_the_record():
    (kernel,) = ncu_kernels("ncu_details_superbenchmark_sm100.csv")
    assert kernel.kernel.startswith("cutlass3x_sm100_tensorop")
    assert kernel.duration_us == pytest.approx(406.24)
    assert kernel.sm_throughput_pct == pytest.approx(23.59)
    assert kernel.memory_throughput_pct == pytest.approx(21.68)
    assert kernel.dram_throughput_pct == pytest.approx(0.74)
    assert (kernel.achieved_occupancy_pct, kernel.theoretical_occupancy_pct) == (15.53, 18.75)
    assert kernel.occupancy_limiter == "registers and shared memory"  # both allow 1 block per SM
    assert kernel.registers == 168 and kernel.shared_bytes == 205696
    assert kernel.matrix_pipe_pct is None and kernel.stalls == ()  # the details page has neither
    assert roofline_class(kernel).startswith("latency-bound")


def test_raw_page_gives_tensor_pipe_and_stall_shares():
    (kernel,) = ncu_kernels("ncu_raw_handwritten_h100.csv")
    assert kernel.launches == 2
    assert kernel.matrix_pipe_pct == pytest.approx(61.99)
    assert kernel.stalls[0].reason == "dispatch_stall"
    assert kernel.stalls[0].cycles_per_instruction == pytest.approx(1.48)
    assert sum(s.share for s in kernel.stalls) == pytest.approx(1.0)
    assert "selected" not in [s.reason for s in kernel.stalls]  # issuing is not a stall
    assert kernel.dram_bytes_per_s == pytest.approx(1.005e12)
    assert kernel.shared_bytes == round(205.7e3)


def test_recorded_h200_raw_page_gives_what_the_hand_run_ncu_showed():
    """The raw page ksci profile kept on an H200; the numbers a hand-run ncu printed for the same launches."""
    (kernel,) = ncu_kernels("ncu_raw_h200_wgmma_kmajor.csv")
    assert kernel.kernel.startswith("<unnamed>::fp8_gemm_wgmma_kernel") and kernel.launches == 3
    assert kernel.matrix_pipe_pct == pytest.approx(72.1, abs=0.1)
    assert kernel.sm_throughput_pct == pytest.approx(66.2, abs=0.2)
    assert (round(kernel.achieved_occupancy_pct, 2), kernel.theoretical_occupancy_pct) == (14.06, 18.75)
    assert kernel.registers == 168
    assert [s.reason for s in kernel.stalls[:4]] == ["barrier", "wait", "long_scoreboard", "dispatch_stall"]
    assert kernel.stalls[0].cycles_per_instruction == pytest.approx(1.72, abs=0.01)
    assert roofline_class(kernel).startswith("compute-bound")


def test_rocprofv3_recorded_sample_and_derived_counters():
    docs = rocprof.kernel_profiles(rocprof.read_rows([DATA / "rocprofv3_counter_collection_rocprofiler_sdk_docs.csv"]))
    assert len(docs) == 4
    divide = next(k for k in docs if k.kernel.startswith("divide_kernel"))
    assert divide.duration_us == pytest.approx(10.16) and divide.registers == 16
    (mfma,) = rocprof.kernel_profiles(rocprof.read_rows([DATA / "rocprofv3_counter_collection_handwritten_mi300x.csv"]))
    assert (mfma.matrix_pipe_pct, mfma.vector_pipe_pct, mfma.achieved_occupancy_pct) == (58.25, 21.5, 18.75)
    assert mfma.lds_bank_conflict_pct == pytest.approx(3.1) and mfma.shared_bytes == 32768
    assert mfma.dram_bytes_per_s == pytest.approx((1048576 + 65536) * 1024 / 408e-6)


def test_rocprof_command_writes_its_passes(tmp_path):
    command = rocprof.rocprof_command("rocprofv3", ["python", "-m", "x"], tmp_path, ("fp8_gemm_mfma",))
    assert command[:2] == ["rocprofv3", "-i"] and command[-3:] == ["python", "-m", "x"]
    jobs = __import__("json").loads((tmp_path / rocprof.INPUT_NAME).read_text())["jobs"]
    assert [job["pmc"] for job in jobs] == [list(p) for p in rocprof.PASSES]
    assert jobs[0]["kernel_include_regex"] == "fp8_gemm_mfma"


def test_digest_is_a_dozen_fixed_lines():
    result = ProfileResult(
        True, "ncu", "2025.1", gpu="NVIDIA H100", shape={"m": 6144}, kernels=ncu_kernels("ncu_raw_handwritten_h100.csv")
    )
    text = digest(result, peak_bandwidth_tbs=3.35)
    lines = text.splitlines()
    assert len(lines) <= 12
    assert lines[2] == "roofline class: compute-bound (compute 71%, memory 45% of peak)"
    assert lines[3].startswith("tensor pipe busy: 62.0%")
    assert "dispatch_stall 1.48 (41%)" in text and "limited by registers and shared memory" in text


def test_no_profiler_is_a_value(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(run, "PLACES", {"ncu": (), "rocprofv3": ()})
    result = profile_library(ProfileRequest("fp8_gemm_kmajor", "/x.so", {"m": 1}))
    assert not result.ok
    assert digest(result) == "no profile: ncu is not installed on this host"


def _fake_tool(folder: Path, name: str, body: str) -> None:
    """A stand-in profiler: a shell script on PATH that behaves as the real one does when it fails."""
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_no_permission_to_read_counters_is_a_value(tmp_path, monkeypatch):
    message = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    _fake_tool(
        tmp_path, "ncu", f'[ "$1" = --version ] && echo "Version 2025.1.0.0" && exit 0\necho "{message}"\nexit 1'
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = profile_library(ProfileRequest("fp8_gemm_kmajor", "/x.so", {"m": 1}))
    assert not result.ok and result.version == "Version 2025.1.0.0"
    assert digest(result).startswith(
        "no profile: no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM"
    )


def test_a_profiler_past_its_time_is_a_value(tmp_path, monkeypatch):
    _fake_tool(tmp_path, "ncu", '[ "$1" = --version ] && exit 0\nsleep 30')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = profile_library(ProfileRequest("fp8_gemm_kmajor", "/x.so", {"m": 1}, timeout_s=1))
    assert not result.ok and digest(result) == "no profile: ncu ran past its 1 s limit"


def test_ksci_profile_without_a_profiler_prints_no_profile(tmp_path, monkeypatch, capsys):
    from ksci.cli import main

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(run, "PLACES", {"ncu": (), "rocprofv3": ()})
    source = Path(__file__).parents[1] / "kernels" / "fp8_gemm_kmajor" / "solutions"
    kernel = next(source.rglob("*.cu"))
    rc = main(["profile", "--problem", "fp8_gemm_kmajor", "--source", str(kernel)])
    assert rc == 1
    assert capsys.readouterr().out.strip() == "no profile: ncu is not installed on this host"


def test_profiles_are_recorded_per_generation_and_summed_for_status(tmp_path):
    from ksci.profile.store import profiling_line, read_profiles, record_profile

    kernels = ncu_kernels("ncu_raw_handwritten_h100.csv")
    ok = ProfileResult(True, "ncu", "2025.1", gpu="H100", shape={"m": 1}, kernels=kernels, seconds=12.25)
    denied = ProfileResult(False, "ncu", "2025.1", why="no permission (ERR_NVGPUCTRPERM)", seconds=1.5)
    record_profile(str(tmp_path), "r", 1, "a" * 16, "base", ok, digest(ok))
    record_profile(str(tmp_path), "r", 2, "b" * 16, "base", denied, digest(denied))
    records = read_profiles(str(tmp_path), "r")
    assert [(r.generation, r.ok) for r in records] == [(1, True), (2, False)]
    assert records[0].digest.splitlines()[2].startswith("roofline class: compute-bound")
    assert profiling_line(str(tmp_path), "r") == (
        "profiling: gen 1: 12.2 s, gen 2: 1.5 s; 1 without a profile (last: no permission (ERR_NVGPUCTRPERM))"
    )
    assert profiling_line(str(tmp_path), "other") is None
