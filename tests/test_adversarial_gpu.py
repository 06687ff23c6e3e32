"""On a GPU: no adversarial kernel is ever `ok`, the dynamic defences hold without the static screen, and a fault
(illegal address, out of memory, hang) ends only its own candidate.

Each kernels/fp8_gemm/solutions/adversarial/*.cu says on its first line what the full pipeline must make of it
(`// expect: a|b`) and on its second what the harness alone must make of it when the screen is bypassed
(`// unscreened: a|b`, or `skip`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ksci.evaluate.host_stages import run_phases
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.stage_order import evaluate_source
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import default_arch, find_toolchain
from ksci.problem.spec import load_problem

pytestmark = pytest.mark.gpu
QUICK = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}
PROBLEM = load_problem("fp8_gemm")
ADVERSARIAL = PROBLEM.solutions("adversarial")
FAKE_KEY = "sk-fake-never-to-be-seen-0123456789"


def _header(path: Path, key: str) -> set[str]:
    for line in path.read_text().splitlines()[:3]:
        if line.startswith(f"// {key}:"):
            return set(line.split(":", 1)[1].strip().split("|"))
    raise AssertionError(f"{path.name} has no `// {key}:` line")


def _options(expected: set[str], tmp_path: Path) -> EvaluationOptions:
    return EvaluationOptions(
        target="cuda",
        benchmarks=PROBLEM.benchmarks[:2],
        time_baselines=False,
        policy=QUICK,
        timeout_s=60 if "timeout" in expected else 300,
        cache_dir=tmp_path / "compile",
    )


@pytest.fixture(autouse=True)
def _cuda_only(gpu_target):
    if gpu_target != "cuda":
        pytest.skip("the adversarial kernels are CUDA")


@pytest.mark.parametrize("path", ADVERSARIAL, ids=[p.name for p in ADVERSARIAL])
def test_adversarial_kernel_is_never_ok(path, tmp_path):
    expected = _header(path, "expect")
    verdict = evaluate_source(PROBLEM, path.read_text(), _options(expected, tmp_path))
    assert verdict.status != Status.OK, verdict.message
    assert verdict.status in expected, f"{verdict.status}: {verdict.message}\n{verdict.harness_log[-2000:]}"


UNSCREENED = [p for p in ADVERSARIAL if _header(p, "unscreened") != {"skip"}]


@pytest.mark.parametrize("path", UNSCREENED, ids=[p.name for p in UNSCREENED])
def test_without_the_screen_the_harness_still_holds(path, tmp_path, monkeypatch):
    """Compiled past the screen on purpose: the cheat must fail or be harmless, and no secret may leak."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("PREFECT_API_KEY", FAKE_KEY)
    expected = _header(path, "unscreened")
    options = _options(expected, tmp_path)
    compiled = compile_source(path.read_text(), find_toolchain("cuda"), default_arch("cuda"), options.cache_dir)
    assert compiled.ok, compiled.log[-2000:]
    verdict = run_phases(PROBLEM, compiled, options)
    assert verdict.status in expected, f"{verdict.status}: {verdict.message}\n{verdict.harness_log[-2000:]}"
    assert FAKE_KEY not in verdict.harness_log
    assert not Path("leak.txt").exists()  # the child wrote in its scratch folder, not here


DEFAULT_STREAMS = {
    "legacy": "<<<grid, block>>>",  # no stream argument: the legacy default stream
    "per-thread": "<<<grid, block, 0, reinterpret_cast<cudaStream_t>(0x2)>>>",  # cudaStreamPerThread's value
}


@pytest.mark.parametrize("launch", DEFAULT_STREAMS.values(), ids=DEFAULT_STREAMS.keys())
def test_work_on_a_default_stream_is_inside_the_timed_region(launch, tmp_path):
    """Honest work launched on a default stream instead of the given one is timed, so the verdict is ok.

    Were it outside the timed region, the events would show next to nothing, below the speed of light, and the
    verdict would be suspicious.
    """
    source = (PROBLEM.root / "solutions" / "wrong" / "out_of_bounds_write.cu").read_text()
    source = source.replace("if (row == 0 && col < 8) c[(size_t)m * n + col]", "if (false) c[0]")
    source = source.replace("<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>", launch)
    assert launch in source and "if (false)" in source
    verdict = evaluate_source(PROBLEM, source, _options({"ok"}, tmp_path))
    assert verdict.status == Status.OK, f"{verdict.status}: {verdict.message}\n{verdict.harness_log[-2000:]}"


FAULTS = ["crash_illegal_address.cu", "out_of_memory.cu", "hang.cu"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_ends_only_its_own_candidate(fault, tmp_path):
    faulty = PROBLEM.root / "solutions" / "wrong" / fault
    expected = {faulty.read_text().splitlines()[0].split("expect:")[1].strip()}
    verdict = evaluate_source(PROBLEM, faulty.read_text(), _options(expected, tmp_path))
    assert verdict.status in expected, verdict.message
    honest = (PROBLEM.root / "solutions" / "correct" / "mma_tuned.cu").read_text()
    after = evaluate_source(PROBLEM, honest, _options({"ok"}, tmp_path))
    assert after.status == Status.OK, f"{after.message}\n{after.harness_log[-2000:]}"
    assert after.fingerprint.get("sandbox"), "the sandbox the child ran in is recorded"
