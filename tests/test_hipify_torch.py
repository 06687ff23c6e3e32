"""Every shipped CUDA seed (at its default point) and CUDA solution goes through the converter CI has (torch's,
torch.utils.hipify; no ROCm there) and each converted source is compiled for gfx942 (clang++-19 in HIP mode) and
gfx940 (Debian's hipcc). Each file's outcome is asserted as expected, none skipped:

- "compiles": converted, and both archs build it;
- "refused: WHAT": the source cannot be converted meaningfully (inline PTX, the CUDA FP8 types torch's tables lack)
  and the conversion fails as a value whose report names WHAT;
- "HIP 5.2 lacks: WHAT": converted, and the compile fails on what Debian's HIP 5.2 headers do not have yet
  (hip/hip_bf16.h and the *_sync warp functions came with ROCm 5.7 and 6.2): the compiler's error names WHAT.

The imported test problems' hand-written kernels (tests/data/) are converted and compiled the same way.
A new seed or solution without an expectation here fails test_every_cuda_source_has_an_expectation. The session
summary (tests/conftest.py) lists each file with the converter that ran and the compile's result per arch.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import re
from pathlib import Path

import pytest
from support.imported_problems import kernels, sources

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import HipifyResult, Status
from ksci.evaluate.setup import EvaluationSetup
from ksci.evaluate.stage_order import evaluate_source
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.hipify import TORCH, hipify_with_torch, refusal
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import list_problems, load_problem
from tasks.evaluation import compile_kernel, hipify

ARCHS = ("gfx942", "gfx940")
PTX_MMA = "refused: inline PTX mma.sync"
PTX_WGMMA = "refused: inline PTX wgmma"
FP8 = "refused: #include <cuda_fp8.h>, __nv_fp8_e4m3"
BF16 = "HIP 5.2 lacks: hip/hip_bf16.h"
SHFL = "HIP 5.2 lacks: __shfl_xor_sync"
EXPECTED = {
    "fp8_gemm/naive": FP8,
    "fp8_gemm/mma": PTX_MMA,
    "fp8_gemm/wgmma": PTX_WGMMA,
    "fp8_gemm/correct/mma_tuned.cu": PTX_MMA,
    "fp8_gemm/correct/smem_tiled.cu": FP8,
    "fp8_gemm/wrong/crash_illegal_address.cu": BF16,
    "fp8_gemm/wrong/hang.cu": "compiles",
    "fp8_gemm/wrong/nan_output.cu": BF16,
    "fp8_gemm/wrong/out_of_bounds_write.cu": FP8,
    "fp8_gemm/wrong/out_of_memory.cu": "compiles",
    "fp8_gemm/wrong/stale_result.cu": FP8,
    "fp8_gemm/wrong/syntax_error.cu": BF16,
    "fp8_gemm/wrong/unresolved_symbol.cu": BF16,
    "fp8_gemm/wrong/writes_input.cu": FP8,
    "fp8_gemm/wrong/wrong_values.cu": FP8,
    "fp8_gemm_kmajor/wgmma": PTX_WGMMA,
    "fp8_gemm_kmajor/correct/smem_tiled.cu": FP8,
    "fp8_gemm_kmajor/wrong/scale_off_by_one.cu": FP8,
    "rmsnorm/naive": "compiles",
    "rmsnorm/vectorized": SHFL,
    "rmsnorm/correct/warp_per_row.cu": SHFL,
    "rmsnorm/wrong/no_eps.cu": SHFL,
    "rmsnorm/wrong/no_weight.cu": SHFL,
    "rmsnorm/wrong/partial_rows.cu": SHFL,
    "rmsnorm/wrong/wrong_mean.cu": SHFL,
}


# The hand-written kernels of the imported test problems (tests/data/) use the runtime API only: all convert.
IMPORTED = {f"imported/{name}/{kind}.cu": path for name in sorted(sources()) for kind, path in kernels(name).items()}
EXPECTED.update(dict.fromkeys(IMPORTED, "compiles"))


def _cuda_sources() -> dict[str, str]:
    sources = {label: path.read_text() for label, path in IMPORTED.items()}
    for name in list_problems():
        problem = load_problem(name)
        for template in problem.templates_for("cuda"):
            sources[f"{name}/{template.name}"] = render_kernel(template, {})
        for kind in ("correct", "wrong"):
            for path in problem.solutions(kind):
                if path.suffix == ".cu":
                    sources[f"{name}/{kind}/{path.name}"] = path.read_text()
    return sources


SOURCES = _cuda_sources()


@pytest.fixture(scope="session")
def converted() -> dict[str, HipifyResult]:
    """Every source through torch's converter (one process for all), or refused before it."""
    refused = {label: refusal(source) for label, source in SOURCES.items()}
    rest = [label for label, result in refused.items() if result is None]
    results = dict(zip(rest, hipify_with_torch([SOURCES[label] for label in rest]), strict=True))
    return {label: refused[label] or results[label] for label in SOURCES}


@pytest.fixture(scope="session")
def compiled(converted, tmp_path_factory, hip_compile_lines) -> dict[tuple[str, str], object]:
    cache = Path(tmp_path_factory.mktemp("hipified-compiles"))
    toolchains = {arch: find_toolchain("rocm", arch) for arch in ARCHS}
    jobs = [(label, arch) for label, arch in itertools.product(SOURCES, ARCHS) if converted[label].ok]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        futures = {
            (label, arch): pool.submit(compile_source, converted[label].source, toolchains[arch], arch, cache)
            for label, arch in jobs
        }
        results = {job: future.result() for job, future in futures.items()}
    for label, result in converted.items():
        if not result.ok:
            hip_compile_lines.append(
                f"{label} (CUDA) not converted ({result.tool or 'refused'}): {result.log.splitlines()[-1][:200]}"
            )
            continue
        for arch in ARCHS:
            outcome = results[(label, arch)]
            status = "ok" if outcome.ok else f"failed: {_first_error(outcome.log)}"
            status += f" (expected: {EXPECTED.get(label, 'none')})"
            hip_compile_lines.append(
                f"{label} (CUDA, converted by {result.tool}) {arch} [{outcome.toolchain}] {status}"
            )
    return results


def _first_error(log: str) -> str:
    line = next((line.strip() for line in log.splitlines() if "error" in line), "no error line")
    return re.sub(r"^\S*kernel\.hip:\d+:\d+: ", "", line)[:160]


def test_every_cuda_source_has_an_expectation():
    assert sorted(SOURCES) == sorted(EXPECTED), "add the new source's expected outcome to EXPECTED"


@pytest.mark.hip_gfx942
@pytest.mark.hipcc
@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_converted_source_has_its_expected_outcome(converted, compiled, label):
    expected, result = EXPECTED[label], converted[label]
    if expected.startswith("refused: "):
        assert not result.ok and expected.removeprefix("refused: ") in result.log, result.log[-2000:]
        return
    assert result.ok and result.tool == TORCH, result.log[-2000:]
    for arch in ARCHS:
        outcome = compiled[(label, arch)]
        if expected == "compiles":
            assert outcome.ok, outcome.log[-3000:]
        else:
            assert not outcome.ok and expected.removeprefix("HIP 5.2 lacks: ") in outcome.log, outcome.log[-3000:]


def test_the_pipeline_fails_an_unconvertible_source_with_the_report_instead_of_compiling_it():
    """tasks/evaluation.py's hipify hands the compile step a value that says why, as `ksci evaluate` does."""
    problem = load_problem("fp8_gemm")
    source = render_kernel(problem.template("cuda", "mma"), {})
    setup = EvaluationSetup("fp8_gemm", "rocm", "store")
    prepared = hipify.fn(setup, source)
    assert not prepared.ok and prepared.source == source
    result = compile_kernel.fn(setup, prepared)
    assert not result.ok and result.command == [] and "inline PTX mma.sync (line" in result.log
    verdict = evaluate_source(problem, source, EvaluationOptions(target="rocm", compile_only=True))
    assert verdict.status == Status.COMPILE_ERROR and "inline PTX mma.sync" in verdict.message
    assert "inline PTX mma.sync" in verdict.compile.log


def test_the_pipeline_converts_with_torch_and_names_it():
    problem = load_problem("rmsnorm")
    prepared = hipify.fn(
        EvaluationSetup("rmsnorm", "rocm", "store"), render_kernel(problem.template("cuda", "naive"), {})
    )
    assert prepared.ok and prepared.note == f"converted from CUDA with {TORCH}"
    assert "hipStream_t" in prepared.source and "cudaStream_t" not in prepared.source


def test_refusals_name_tma_tensor_maps_and_libcu():
    source = "#include <cudaTypedefs.h>\n#include <cuda/barrier>\nCUtensorMap map;\n"
    log = refusal(source).log
    assert "cudaTypedefs.h (the driver API's typedefs, for TMA tensor maps) (line 1) has no HIP equivalent" in log
    assert "CUtensorMap (TMA tensor maps) (line 3)" in log and "libcu++" in log
