"""Every HIP template and HIP solution, run on the CPU against the problem's reference (no AMD GPU is reachable).

tests/support/hip_cpu/hip/hip_runtime.h is a CPU emulator of the part of HIP the templates use: every thread of a
workgroup a fiber, __syncthreads a barrier, the FP8 MFMA wave-wide, with each element of A, B and D where
AMD's Matrix Instruction Calculator says it lives (tests/data/mfma_layouts.json, written by
tests/support/make_mfma_layouts.py), __shfl_xor wave-wide too. A template's kernel is rendered, built for the host
with clang++-19 (its `kernel<<<...>>>(...)` launches, which plain C++ cannot parse, written as hipLaunchKernelGGL)
and called through its entry point on the problem's own inputs (reference.generate_input on the CPU, e4m3fnuz as on
MI300) and compared with reference.reference under the problem's ROCm tolerance, as the harness compares on a GPU,
on every input profile the problem declares. So the indexing, staging, swizzles, scales, reductions, partial tiles
and epilogue of each point are checked; timing, the compiler's device code and the hardware's rounding inside an
MFMA are not (tests/test_hip_gfx942.py compile-checks the device code for gfx942). The last tests show the emulator
catching kernels that are wrong in ways a compile check cannot.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from ksci.evaluate.harness.check import compare
from ksci.problem.render import render_kernel
from ksci.problem.spec import list_problems, load_problem

ROOT = Path(__file__).resolve().parent.parent
EMULATOR = ROOT / "tests" / "support" / "hip_cpu"
LAYOUTS = ROOT / "tests" / "data" / "mfma_layouts.json"
INSTRUCTIONS = {32: "v_mfma_f32_32x32x16_fp8_fp8", 16: "v_mfma_f32_16x16x32_fp8_fp8"}
pytestmark = [pytest.mark.clang_host]

# Small shapes that still reach every edge. The GEMMs: one partial tile (64 x 64), two K blocks with a partial N
# tile (192 = 128 + 64), N = 576, whose last 128-wide scale block of B is half full, and K = 2304: 18 K blocks, which
# choose_splits cuts into SPLIT_K parts (with 1 tile on a 304-CU device, a split pays from about 10 K blocks on).
# rmsnorm: one row, and three rows of 1032 columns (not a multiple of 256; an odd row count for 2 rows a block).
GEMM_SHAPES = ({"m": 64, "n": 64, "k": 128}, {"m": 128, "n": 192, "k": 256}, {"m": 64, "n": 576, "k": 256})
SHAPES = {
    "fp8_gemm": GEMM_SHAPES,
    "fp8_gemm_kmajor": GEMM_SHAPES,
    "rmsnorm": ({"rows": 1, "cols": 2048}, {"rows": 3, "cols": 1032}),
}
LONG_K = {"m": 128, "n": 128, "k": 2304}
# Per template, the default and points that between them take every value of MFMA, LDS_STAGES, PREFETCH, LDS_PAD,
# SWIZZLE and GROUP_M, and 2 to 8 waves.
MFMA_FP8_POINTS = (
    {},
    {"BM": 64, "BN": 128, "WAVES_M": 1, "WAVES_N": 2, "MFMA": 16, "LDS_STAGES": 1, "PREFETCH": 1, "LDS_PAD": 16,
     "SWIZZLE": 0, "GROUP_M": 1},
    {"BM": 128, "BN": 192, "WAVES_M": 2, "WAVES_N": 4, "MFMA": 16, "LDS_STAGES": 1, "PREFETCH": 2, "LDS_PAD": 0,
     "SWIZZLE": 0, "GROUP_M": 8},
    {"BM": 64, "BN": 64, "WAVES_M": 2, "WAVES_N": 2, "MFMA": 32, "LDS_STAGES": 2, "PREFETCH": 2, "LDS_PAD": 0,
     "SWIZZLE": 1, "GROUP_M": 4, "SPLIT_K": 8},
    {"SPLIT_K": 4},
)  # fmt: skip
CASES = {
    ("fp8_gemm", "mfma_fp8"): MFMA_FP8_POINTS,
    ("fp8_gemm_kmajor", "mfma_fp8"): MFMA_FP8_POINTS,
    ("fp8_gemm", "mfma"): ({}, {"BM": 64, "BN": 64, "WAVES_M": 1, "WAVES_N": 2, "LDS_PAD": 0}),
    ("fp8_gemm", "naive"): ({},),
    ("fp8_gemm_kmajor", "naive"): ({},),
    ("rmsnorm", "naive"): ({}, {"THREADS": 64}),
    ("rmsnorm", "vectorized"): ({}, {"THREADS": 128, "ROWS_PER_BLOCK": 2}, {"THREADS": 1024, "ROWS_PER_BLOCK": 4}),
}
SOLUTIONS = (("fp8_gemm", "lds_tiled.hip"), ("rmsnorm", "block_per_row.hip"))  # solutions/correct/


def _layout_header(path: Path) -> Path:
    """The calculator's tables as the emulator reads them: mfmaF_a[i][k] and mfmaF_b[k][j] = {lane, register,
    byte}; mfmaF_d[lane][register] = {i, j} (inverted here, so that each lane finds its own result elements)."""
    tables = json.loads(LAYOUTS.read_text())["instructions"]
    lines = []
    for f, name in INSTRUCTIONS.items():
        layout = tables[name]
        at = [[None] * (f * f // 64) for _ in range(64)]
        for i, row in enumerate(layout["D"]):
            for j, (lane, register, _byte) in enumerate(row):
                at[lane][register] = [i, j]
        for label, table in (("a", layout["A"]), ("b", layout["B"]), ("d", at)):
            dims = f"[{len(table)}][{len(table[0])}][{len(table[0][0])}]"
            lines.append(
                f"constexpr int mfma{f}_{label}{dims} = {json.dumps(table).replace('[', '{').replace(']', '}')};"
            )
    path.write_text("\n".join(lines) + "\n")
    return path


# The flags of the emulator's header (precompiled once a session) and of every source built against it.
FLAGS = ("-std=c++20", "-O1", "-fPIC", "-pthread", "-w", f"-I{EMULATOR}")


def _precompile(header: Path) -> Path:
    """The emulator's header with the layout tables, precompiled: the C++20 standard headers it includes take
    most of a build's time (about 5 of 9 s), paid once rather than once per source."""
    pch = header.with_suffix(".pch")
    argv = ["clang++-19", *FLAGS, f'-DKSCI_MFMA_LAYOUTS="{header}"', "-x", "c++-header"]
    subprocess.run([*argv, str(EMULATOR / "hip" / "hip_runtime.h"), "-o", str(pch)], check=True)
    return pch


def _build(source: str, folder: Path, header: Path) -> Path | str:
    """The source built for the host against the emulator; the library's path, or the compiler's errors.
    `header`: the layout tables, with their precompiled emulator header beside them (.pch)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cpp").write_text(
        re.sub(r"(\w+)<<<(.*?)>>>\(", r"hipLaunchKernelGGL(\1, \2, ", source, flags=re.S)
    )
    library = folder / "kernel.so"
    argv = ["clang++-19", *FLAGS, f'-DKSCI_MFMA_LAYOUTS="{header}"', "-shared", "-include-pch"]
    argv += [str(header.with_suffix(".pch")), "-x", "c++", str(folder / "kernel.cpp"), "-o", str(library)]
    done = subprocess.run(argv, capture_output=True, text=True)
    return library if done.returncode == 0 else done.stderr[-4000:]


def _label(problem: str, template: str, point: dict) -> str:
    return f"{problem}/{template}[" + ",".join(f"{k}={v}" for k, v in point.items()) + "]"


def _sources() -> dict[str, tuple[str, str]]:
    """label -> (problem, HIP source) for every case, each point checked against the template's constraints."""
    sources = {}
    for (name, template_name), points in CASES.items():
        problem = load_problem(name)
        template = problem.template("hip", template_name)
        for point in points:
            params = {**template.default, **point}
            assert template.feasible(params), f"{name}/{template_name}: {params} breaks a declared constraint"
            sources[_label(name, template_name, point)] = (name, render_kernel(template, params))
    for name, file in SOLUTIONS:
        path = ROOT / "kernels" / name / "solutions" / "correct" / file
        sources[f"{name}/solutions/correct/{file}"] = (name, path.read_text())
    return sources


SOURCES = _sources()


@pytest.fixture(scope="session")
def layout_header(tmp_path_factory) -> Path:
    """The layout tables' header, with the emulator's header precompiled against it beside it."""
    header = _layout_header(tmp_path_factory.mktemp("mfma-layouts") / "mfma_layouts.h")
    _precompile(header)
    return header


@pytest.fixture(scope="session")
def emulated(tmp_path_factory, layout_header) -> dict[str, Path | str]:
    """Every source built once, in parallel: label -> library (or the compiler's errors)."""
    work, header = tmp_path_factory.mktemp("hip-emulated"), layout_header
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        futures = {
            label: pool.submit(_build, source, work / f"case{i}", header)
            for i, (label, (_name, source)) in enumerate(SOURCES.items())
        }
        return {label: future.result() for label, future in futures.items()}


def run_case(library: Path, problem_name: str, shape: dict, profile: str, seed: int = 1) -> dict:
    """Call the entry point on one input set, as the harness does on a GPU, and compare with the reference."""
    problem = load_problem(problem_name)
    ref = problem.reference_module()
    inputs = ref.generate_input(shape, seed, "rocm", "cpu", **({} if profile == "spec" else {"profile": profile}))
    expected = ref.reference(inputs)
    for name in problem.outputs:
        inputs[name].fill_(float("nan"))  # what the kernel leaves unwritten cannot pass
    entry = getattr(ctypes.CDLL(str(library)), problem.entry_name)
    entry.restype = ctypes.c_int
    args = []
    for name in problem.entry_args:
        if name == "stream":
            args.append(ctypes.c_void_p(0))
        elif name in inputs:
            args.append(ctypes.c_void_p(inputs[name].data_ptr()))
        else:
            args.append(ctypes.c_int(int(shape[name])))
    assert entry(*args) == 0
    tol = problem.tolerance("rocm")
    (output,) = problem.outputs
    magnitude = (lambda: ref.magnitude(inputs)[output]) if hasattr(ref, "magnitude") else None
    return compare(inputs[output], expected[output], tol.rtol, tol.atol, tol.atol_rms, tol.acc_rtol, magnitude)


def _runs(label: str) -> list[tuple[dict, str]]:
    """Each shape on the challenge's inputs; every other input profile on the last shape (for the GEMMs, the one
    with a partial scale block). The GEMMs' one-thread-per-output naive kernels (a workgroup of 256 threads per
    16 x 16 outputs) on the first shape only; the points with split-K also on LONG_K, where it splits."""
    name = SOURCES[label][0]
    shapes, profiles = SHAPES[name], load_problem(name).inputs
    if name.startswith("fp8_gemm") and "naive" in label:
        return [(shapes[0], "spec")]
    runs = [(shape, "spec") for shape in shapes] + [(shapes[-1], p) for p in profiles if p != "spec"]
    return runs + ([(LONG_K, "spec"), (LONG_K, "zeros")] if "SPLIT_K" in label else [])


@pytest.mark.parametrize("label", list(SOURCES), ids=list(SOURCES))
def test_a_hip_kernel_matches_the_reference_on_the_emulator(emulated, label):
    library = emulated[label]
    assert isinstance(library, Path), f"{label} does not build against the emulator:\n{library}"
    problem = SOURCES[label][0]
    for shape, profile in _runs(label):
        result = run_case(library, problem, shape, profile)
        assert result["ok"], f"{label} {shape} {profile}: {result['report']}"


def _broken(folder: Path, header: Path, label: str, old: str, new: str) -> Path:
    """The case `label`'s source with one line changed, built against the emulator."""
    source = SOURCES[label][1]
    assert source.count(old) == 1, old
    library = _build(source.replace(old, new), folder, header)
    assert isinstance(library, Path), library
    return library


def test_the_emulator_catches_operands_that_disagree_on_k(tmp_path, layout_header):
    """B's fragments read the neighbouring 16-byte chunk of k: every product pairs the wrong k (a compile check
    passes it: the code is as valid as before)."""
    read_b = "bv[fn] = *(const u32x4*)(tile_b + lds_offset(wave_n * WN + fn * MFMA + frag_row, chunk));"
    library = _broken(
        tmp_path, layout_header, "fp8_gemm/mfma_fp8[]", read_b, read_b.replace(", chunk)", ", chunk ^ 1)")
    )
    result = run_case(library, "fp8_gemm", GEMM_SHAPES[0], "spec")
    assert not result["ok"] and result["mismatches"] > 0.9 * 64 * 64


def test_the_emulator_catches_a_k_major_staging_with_the_column_major_stride(tmp_path, layout_header):
    """The K-major staging stepping rows by M (the column-major layout's leading dimension) instead of K."""
    step = "g + (size_t)row * (size_t)k + kbase"
    library = _broken(
        tmp_path, layout_header, "fp8_gemm_kmajor/mfma_fp8[]", step, step.replace("(size_t)k", "(size_t)rows")
    )
    result = run_case(library, "fp8_gemm_kmajor", GEMM_SHAPES[1], "spec")
    assert not result["ok"]


def test_the_emulator_catches_scales_of_the_wrong_k_block(tmp_path, layout_header):
    """A scales read one K block late (the last block's row of a_scale repeats): right on K = 128, wrong from the
    second block on, as kernels/fp8_gemm_kmajor/solutions/wrong/scale_off_by_one.cu plays on CUDA."""
    read = "*(const floatx4*)(a_scale + row + (size_t)kb * m)"
    late = "*(const floatx4*)(a_scale + row + (size_t)(kb > 0 ? kb - 1 : 0) * m)"
    library = _broken(tmp_path, layout_header, "fp8_gemm/mfma_fp8[]", read, late)
    assert run_case(library, "fp8_gemm", GEMM_SHAPES[0], "spec")["ok"]  # one K block: nothing to get wrong
    assert not run_case(library, "fp8_gemm", GEMM_SHAPES[1], "spec")["ok"]


def test_the_mfma_tables_place_every_element_once():
    """Each instruction's A, B and D tables, as the calculator printed them, use every (lane, register, byte) of
    the operands once: F x K bytes of A in 64 lanes x 2 registers x 4 bytes, F x F results in 64 x F*F/64."""
    tables = json.loads(LAYOUTS.read_text())["instructions"]
    for f, name in INSTRUCTIONS.items():
        k = 16 if f == 32 else 32
        for matrix, rows, cols, per_lane in (("A", f, k, 8), ("B", k, f, 8), ("D", f, f, f * f // 64)):
            table = tables[name][matrix]
            assert (len(table), len(table[0])) == (rows, cols), (name, matrix)
            places = {tuple(entry) for row in table for entry in row}
            assert len(places) == rows * cols == 64 * per_lane, (name, matrix)


def test_the_emulator_catches_a_split_k_sum_that_leaves_out_a_split(tmp_path, layout_header):
    """The tile's last workgroup skipping the first split's partial: right where the shape is not split (so the
    split-K path is what the long-K case runs), wrong on LONG_K."""
    add = "acc[fm][fn][r] = sp == 0 ? v : acc[fm][fn][r] + v;"
    skip_first = add.replace("sp == 0", "sp <= 1")
    library = _broken(tmp_path, layout_header, "fp8_gemm_kmajor/mfma_fp8[SPLIT_K=4]", add, skip_first)
    assert run_case(library, "fp8_gemm_kmajor", GEMM_SHAPES[0], "spec")["ok"]
    assert not run_case(library, "fp8_gemm_kmajor", LONG_K, "spec")["ok"]


def test_the_emulator_catches_a_wave_reduction_that_shuffles_with_itself(tmp_path, layout_header):
    """rmsnorm's vectorized wave sum reading its own lane instead of lane ^ offset: each lane's "sum" is then its own
    value times the wave size, so the row's mean square and every output are wrong."""
    shuffle = "v += __shfl_xor(v, offset, WARP);"
    library = _broken(tmp_path, layout_header, "rmsnorm/vectorized[]", shuffle, shuffle.replace("offset,", "0,"))
    assert not run_case(library, "rmsnorm", SHAPES["rmsnorm"][0], "spec")["ok"]


def test_every_hip_template_and_correct_hip_solution_is_among_the_cases():
    """A HIP template or solution added later joins the cases above, or this fails."""
    for name in list_problems():
        problem = load_problem(name)
        for template in problem.templates_for("hip"):
            assert (name, template.name) in CASES, f"{name}/{template.name} is not emulated"
        for path in problem.solutions("correct"):
            if path.suffix == ".hip":
                assert (name, path.name) in SOLUTIONS, f"{name}/solutions/correct/{path.name} is not emulated"
