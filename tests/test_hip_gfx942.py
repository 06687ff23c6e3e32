"""Every HIP seed template (its default and a few points that satisfy its constraints) and every HIP solution
compiles for gfx942 (MI300X: hipcc where it can, else clang++-19 in HIP mode) and for gfx940 (Debian's hipcc).

The compiles run in parallel once per session; each source and arch is then its own test. Every compile adds a
line (file, arch, compiler, VGPRs/AGPRs/SGPRs/LDS/scratch/occupancy) to the session summary that
tests/conftest.py prints, so that the CI log shows what was built and with what. Compile-checked only: no HIP
kernel here has run on an MI300.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import random
import subprocess
from pathlib import Path

import pytest

from ksci.evaluate.results import CompileResult
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import list_problems, load_problem

ARCHS = ("gfx942", "gfx940")
EXTRA_POINTS = 3  # feasible points per template besides the default
NOT_COMPILING = {"compile_error"}  # solutions whose first line says they must not compile
MARKS = [pytest.mark.hip_gfx942, pytest.mark.hipcc]


def _sources() -> dict[str, str]:
    """label -> HIP source: the templates' points and the solutions meant to compile."""
    sources = {}
    for name in list_problems():
        problem = load_problem(name)
        for template in problem.templates:
            if template.dialect != "hip":
                continue
            space = [dict(zip(template.params, v, strict=True)) for v in itertools.product(*template.params.values())]
            feasible = [p for p in space if template.feasible(p)]
            points = [template.default, *random.Random(f"{name}/{template.name}").sample(feasible, EXTRA_POINTS)]
            for params in {tuple(sorted(p.items())): p for p in points}.values():
                label = f"{name}/{template.name}[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"
                sources[label] = render_kernel(template, params)
        for kind in ("correct", "wrong"):
            for path in problem.solutions(kind):
                text = path.read_text()
                expected = text.splitlines()[0].split("expect:")[-1].strip()
                if path.suffix == ".hip" and expected not in NOT_COMPILING:
                    sources[f"{name}/solutions/{kind}/{path.name}"] = text
    return sources


SOURCES = _sources()


def _describe(label: str, arch: str, result: CompileResult) -> str:
    if not result.ok:
        return f"{label} {arch} [{result.toolchain}] FAILED"
    kernels = "; ".join(
        f"{k.name}: VGPRs {k.registers} AGPRs {k.agprs} SGPRs {k.sgprs} LDS {k.shared_bytes} "
        f"scratch {k.stack_or_scratch_bytes} spills {k.spill_bytes} occupancy {k.occupancy}"
        for k in result.resources
    )
    return f"{label} {arch} [{result.toolchain}] {kernels}"


@pytest.fixture(scope="session")
def hip_compiles(tmp_path_factory, hip_compile_lines) -> dict[tuple[str, str], CompileResult]:
    cache = tmp_path_factory.mktemp("hip-compiles")
    toolchains = {arch: find_toolchain("rocm", arch) for arch in ARCHS}
    jobs = list(itertools.product(SOURCES, ARCHS))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        futures = {
            job: pool.submit(compile_source, SOURCES[job[0]], toolchains[job[1]], job[1], Path(cache)) for job in jobs
        }
        results = {job: future.result() for job, future in futures.items()}
    hip_compile_lines.extend(_describe(label, arch, result) for (label, arch), result in results.items())
    return results


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("label", list(SOURCES))
@pytest.mark.hip_gfx942
@pytest.mark.hipcc
def test_hip_source_compiles(hip_compiles, label, arch):
    result = hip_compiles[(label, arch)]
    assert result.ok, result.log[-3000:]
    assert result.resources, f"no resource report parsed from:\n{result.log[-2000:]}"
    for kernel in result.resources:
        assert kernel.registers and kernel.occupancy, kernel
        assert (
            kernel.agprs is not None and kernel.shared_bytes is not None and kernel.stack_or_scratch_bytes is not None
        )


@pytest.mark.hip_gfx942
@pytest.mark.hipcc
def test_compilers_per_arch(hip_compiles):
    """gfx942 is built by a compiler that knows it; with Debian's hipcc 5.2 that is clang++ in HIP mode."""
    gfx942 = find_toolchain("rocm", "gfx942")
    assert any(r.toolchain == gfx942.version for (_, arch), r in hip_compiles.items() if arch == "gfx942")
    assert all(r.command[0] == gfx942.compiler for (_, arch), r in hip_compiles.items() if arch == "gfx942")


@pytest.mark.hip_gfx942
@pytest.mark.hipcc
def test_mfma_fp8_default_point_uses_fp8_mfma_without_spills(hip_compiles, tmp_path):
    """The pipelined template's default point: the FP8 MFMA instruction is in the gfx942 ISA, and nothing spills."""
    (label,) = [s for s in SOURCES if s.startswith("fp8_gemm/mfma_fp8[")][:1]
    for arch in ARCHS:
        (kernel,) = hip_compiles[(label, arch)].resources
        assert kernel.spill_bytes == 0 and kernel.stack_or_scratch_bytes == 0, kernel
    toolchain = find_toolchain("rocm", "gfx942")
    source = tmp_path / "kernel.hip"
    source.write_text(SOURCES[label])
    argv = toolchain.command(str(source), str(tmp_path / "kernel.s"), "gfx942")
    argv = [a for a in argv if a not in ("-shared", "-fPIC")] + ["--cuda-device-only", "-S"]
    subprocess.run(argv, check=True, capture_output=True, env=toolchain.environment(), timeout=300)
    assert "v_mfma_f32_32x32x16_fp8_fp8" in (tmp_path / "kernel.s").read_text()
