"""A `suspicious` verdict names the other processes on its GPU (ksci/evaluate/judge/neighbours.py): a stand-in
`nvidia-smi` on PATH answers `--query-compute-apps` as the real one prints it (one CSV line per process: GPU uuid,
pid, process name), so the real query, parse and pipeline path (ksci.evaluate.stage_order.run_compiled) are taken."""

from __future__ import annotations

import os
import stat
from contextlib import nullcontext
from pathlib import Path

import pytest

from ksci.evaluate.host_stages import PreparedSource
from ksci.evaluate.judge.neighbours import gpu_neighbours, with_neighbours
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CompileResult, Status, Verdict
from ksci.evaluate.stage_order import run_compiled
from ksci.problem.spec import load_problem

UUID = "GPU-a4b03490-26c3-f671-7cdf-fb230382692d"
OTHER = "GPU-33395613-6a22-af5a-43ba-292d3b8aea74"


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """A stand-in nvidia-smi: prints `lines` (set by the test), records each call in calls.txt."""
    lines = tmp_path / "apps.csv"
    calls = tmp_path / "calls.txt"
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\ncat "{lines}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    lines.write_text("")
    return lines, calls


def test_the_other_processes_on_the_timed_gpu_are_named_and_no_one_else(smi):
    lines, calls = smi
    lines.write_text(
        f"{UUID}, 4242, /opt/conda/bin/python3\n"
        f"{OTHER}, 5151, /usr/bin/trainer\n"  # another GPU: not this candidate's neighbour
        f"{UUID}, {os.getpid()}, /usr/bin/python3\n"  # this process
        f"{UUID}, 6161, [Not Found]\n"
    )
    assert gpu_neighbours(UUID.removeprefix("GPU-"), "cuda") == ["4242 python3", "6161 [Not Found]"]
    assert gpu_neighbours(UUID, "cuda", frozenset({4242})) == ["6161 [Not Found]"]
    assert "--query-compute-apps=gpu_uuid,pid,process_name" in calls.read_text()


def test_nothing_is_named_where_it_cannot_be_known(smi, monkeypatch):
    lines, _ = smi
    lines.write_text(f"{UUID}, 4242, python3\n")
    assert gpu_neighbours(None, "cuda") == []  # a verdict without the GPU's uuid
    assert gpu_neighbours(UUID, "rocm") == []
    monkeypatch.setenv("PATH", str(Path(os.__file__).parent.parent.parent / "bin"))  # no nvidia-smi
    assert gpu_neighbours(UUID, "cuda") == []


def test_a_failing_nvidia_smi_names_nobody(tmp_path, monkeypatch):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_neighbours(UUID, "cuda") == []


def test_the_message_names_at_most_four_and_counts_the_rest():
    text = with_neighbours("6144x4608x7168: the child's clock says ...", [f"{p} python3" for p in range(6)])
    assert text.startswith("6144x4608x7168: the child's clock says ...\nnote: other processes were using this GPU")
    assert "pid 0 python3, 1 python3, 2 python3, 3 python3 and 2 more" in text
    assert with_neighbours("m", []) == "m"


class _Backend:
    """A backend whose run gives the verdict it was made with, on a GPU with `UUID`."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def runner(self, problem, source, compiled, options, spares=0):
        status = self.status

        class Run:
            def start(self) -> None:
                pass

            def run(self, device):
                return Verdict(
                    status, problem.name, "cuda", message="6144x4608x7168: a doubt", fingerprint={"gpu_uuid": UUID}
                )

        return nullcontext(Run())


@pytest.mark.parametrize("status", [Status.SUSPICIOUS, Status.OK])
def test_only_a_suspicious_verdict_asks_and_names_its_neighbours(smi, status):
    lines, calls = smi
    lines.write_text(f"{UUID}, 4242, python3\n")
    compiled = CompileResult(True, "cuda", "sm_90a", "nvcc", [], "", library="/lib.so")
    verdict = run_compiled(
        _Backend(status), load_problem("fp8_gemm"), PreparedSource("src", True), compiled, EvaluationOptions()
    )
    assert verdict.status == status
    if status == Status.SUSPICIOUS:
        assert "6144x4608x7168: a doubt\nnote: other processes were using this GPU" in verdict.message
        assert "(pid 4242 python3)" in verdict.message
    else:
        assert verdict.message == "6144x4608x7168: a doubt" and not calls.exists()


def test_a_harness_childs_own_descendants_are_not_named(smi):
    """A sandboxed harness runs Python as a grandchild of the pid its parent started (the sandbox's launcher): the
    note names only processes that are not this run's, however deep in its process tree."""
    import subprocess

    lines, _calls = smi
    launcher = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        grandchild = _wait_for_child_of(launcher.pid)
        lines.write_text(f"{UUID}, {grandchild}, python3\n{UUID}, 999999, /opt/conda/bin/python3\n")
        assert gpu_neighbours(UUID, "cuda", frozenset({launcher.pid})) == ["999999 python3"]
        # Any descendant of this process is the run's own (a spare, the next candidate's harness), named or not.
        assert gpu_neighbours(UUID, "cuda") == ["999999 python3"]
    finally:
        launcher.kill()
        launcher.wait()


def _wait_for_child_of(pid: int) -> int:
    import time

    for _ in range(200):
        children = Path(f"/proc/{pid}/task/{pid}/children")
        found = children.read_text().split() if children.exists() else []
        if found:
            return int(found[0])
        time.sleep(0.01)
    raise AssertionError(f"process {pid} started no child")
