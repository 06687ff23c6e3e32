"""The adversarial kernels of issue 20, compiled past the screen: what their libraries import is what their headers
say the library check refuses, and the two meant for the harness import nothing it would refuse.

A CPU test (nvcc only): the GPU test (tests/test_adversarial_gpu.py) runs the same kernels on a device.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from ksci.evaluate.screen import library as libcheck
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.spec import load_problem

pytestmark = pytest.mark.nvcc
ADVERSARIAL = load_problem("fp8_gemm").root / "solutions" / "adversarial"
# Kernel -> the imports its header names as what the library check refuses (empty: it must pass the check).
EXPECTED_IMPORTS = {
    "mapped_host_flag.cu": {"cudaHostAlloc", "cudaHostGetDevicePointer"},
    "timer_python_first_call.cu": {"PyGILState_Ensure", "PyRun_SimpleString"},
    "timer_python_load_time.cu": {"PyGILState_Ensure", "PyRun_SimpleString"},
    "hidden_stream_split_label.cu": {"cudaStreamCreateWithFlags"},
    "rdtsc_thread_pointer.cu": {"pthread_create"},
    "memo_by_content_sample.cu": set(),
    "spot_check_output.cu": set(),
    "l2_persisting_window.cu": {"cudaStreamSetAttribute", "cudaDeviceSetLimit"},
    "cuda_graph_replay.cu": {"cudaGraphLaunch", "cudaStreamBeginCapture"},
    "shape_table.cu": set(),
    "bf16_accumulation.cu": set(),
    "launches_nothing_sometimes.cu": set(),
    "near_free_shape.cu": set(),
}
REFUSED_PREFIXES = ("Py", "_Py", "pthread_", "dl", "cudaStreamCreate", "cudaEvent", "cudaGraph", "cudaHost")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, str]:
    """Every kernel above compiled with ksci's compile path (no screen), in parallel."""
    toolchain, cache = find_toolchain("cuda"), tmp_path_factory.mktemp("compile")

    def build(name: str):
        return name, compile_source((ADVERSARIAL / name).read_text(), toolchain, "sm_90a", cache)

    with ThreadPoolExecutor(len(EXPECTED_IMPORTS)) as pool:
        built = dict(pool.map(build, EXPECTED_IMPORTS))
    failed = {name: result.log[-1500:] for name, result in built.items() if not result.ok}
    assert not failed, failed
    return {name: result.library for name, result in built.items()}


def _imports(library: str) -> set[str]:
    out = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


@pytest.mark.parametrize("name", sorted(EXPECTED_IMPORTS))
def test_a_kernel_imports_what_its_header_says(libraries, name):
    imports = _imports(libraries[name])
    expected = EXPECTED_IMPORTS[name]
    assert expected <= imports, f"{name} imports {sorted(imports)}"
    for symbol in expected:
        assert symbol in (ADVERSARIAL / name).read_text(), f"{name}'s header or code should name {symbol}"
    if not expected:  # meant to reach the harness: nothing a library check would refuse
        assert not {s for s in imports if s.startswith(REFUSED_PREFIXES)}, sorted(imports)


@pytest.mark.parametrize("name", sorted(EXPECTED_IMPORTS))
def test_the_library_check_decides_as_the_header_says(libraries, name):
    checked = libcheck.check_library(libraries[name], "cuda")
    if EXPECTED_IMPORTS[name]:
        assert not checked.ok and any(s in " ".join(checked.reasons) for s in EXPECTED_IMPORTS[name]), checked
    else:
        assert checked.ok, checked.reasons
    if name == "timer_python_load_time.cu":  # a load-time initialiser of its own, besides the Py* imports
        assert any("when it is loaded" in reason for reason in checked.reasons), checked.reasons


def test_every_new_kernel_says_what_it_plays_and_what_catches_it():
    for name in EXPECTED_IMPORTS:
        lines = (ADVERSARIAL / name).read_text().splitlines()
        assert lines[0].startswith("// expect: ") and lines[1].startswith("// unscreened: "), name
        header = " ".join(line for line in lines[:14] if line.startswith("//"))
        assert "Plays " in header and "Caught by:" in header, name
