"""Bounded outputs (issue 51): a source whose host assembly `.fill`s megabytes compiles into a `compile_error` that
names the limit it went past (the library's, or the compile folder's, which RLIMIT_FSIZE enforces on the compiler),
and nothing of it stays in the compile cache; a harness child that prints or reports past its limit gets a
`runtime_error` that names it. The limits are lowered through their environment variables (ksci/evaluate/sandbox/bounds.py)
so that these tests write a few MB only."""

from __future__ import annotations

from pathlib import Path

import pytest
from children import reporting_child

from ksci.evaluate.host_stages import first_error
from ksci.evaluate.judge.classify import classify
from ksci.evaluate.results import Status, Verdict
from ksci.evaluate.run.isolate import run_child
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.spec import load_problem

MIB = 1 << 20
KERNEL = """
#include <cuda_runtime.h>
__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" int run(float* x, int n, void* stream) {
  scale<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, n);
  return (int)cudaGetLastError();
}
"""
FILL = 'asm(".pushsection .rodata\\n.fill {n},1,0\\n.popsection");\n'  # host assembly: n zero bytes


def _cache_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.nvcc
@pytest.mark.parametrize(
    ("variable", "said"),
    [
        ("KSCI_MAX_LIBRARY_BYTES", "the compiled library holds"),
        ("KSCI_MAX_COMPILE_BYTES", "the compile wrote more than the limit"),
    ],
)
def test_a_fill_past_a_limit_is_a_compile_error_naming_it_and_nothing_is_kept(tmp_path, monkeypatch, variable, said):
    monkeypatch.setenv(variable, str(2 * MIB))
    result = compile_source(KERNEL + FILL.format(n=4 * MIB), find_toolchain("cuda"), "sm_90a", tmp_path / "cache")
    assert not result.ok and result.library is None
    message = first_error(result.log)
    assert said in message and f"2.0 MiB ({variable})" in message, result.log
    assert _cache_bytes(tmp_path / "cache") < MIB  # no library, no work folder left behind
    again = compile_source(KERNEL + FILL.format(n=4 * MIB), find_toolchain("cuda"), "sm_90a", tmp_path / "cache")
    assert not again.cached and not again.ok  # not cached: a raised limit builds it again


@pytest.mark.nvcc
def test_a_fill_under_the_limits_still_compiles(tmp_path):
    result = compile_source(KERNEL + FILL.format(n=MIB), find_toolchain("cuda"), "sm_90a", tmp_path / "cache")
    assert result.ok, result.log
    assert Path(result.library).stat().st_size > MIB


@pytest.mark.parametrize(
    "body",
    [
        'send("started")\nsys.stdout.write("x" * (3 << 20))\nsys.stdout.flush()\nsend("result", status="ok")',
        'send("started")\nreport.write("y" * (3 << 20))\nsend("result", status="ok")',
    ],
    ids=["stdout", "report-pipe"],
)
def test_a_harness_child_past_its_output_limit_is_a_runtime_error_naming_it(tmp_path, monkeypatch, body):
    monkeypatch.setenv("KSCI_MAX_HARNESS_OUTPUT_BYTES", str(MIB))
    outcome = run_child(reporting_child(tmp_path, body), timeout_s=60)
    assert not outcome.timed_out
    problem = load_problem("rmsnorm")
    verdict = classify(problem, outcome, Verdict(Status.COMPILED, problem.name, "cuda"))
    assert verdict.status == Status.RUNTIME_ERROR
    assert "went past the limit of 1.0 MiB (KSCI_MAX_HARNESS_OUTPUT_BYTES)" in verdict.message
    assert len(outcome.output) <= MIB and sum(len(str(m)) for m in outcome.messages) < MIB


def test_a_harness_child_within_its_output_limit_is_not_flagged(tmp_path):
    outcome = run_child(reporting_child(tmp_path, 'print("x" * 1000)\nsend("result", status="ok")'), timeout_s=60)
    assert outcome.over_limit == "" and outcome.returncode == 0 and outcome.last("result")
