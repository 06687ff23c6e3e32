"""The whole loop against an LLM that writes cheats (issue 30): two LLM generations of fp8_gemm in which the scripted
OpenAI-compatible server's writer answers every plan, and every repair, with a kernel of
kernels/fp8_gemm/solutions/adversarial/. None may be recorded `ok`, none may be the run's best, `ksci status` and the
report show them under their failure classes, and the designer's next prompt carries the failures.

Which verdicts are real here: the static screen runs as on a GPU host (the simulator's compile is the real screen),
so side_stream.cu and timer_patch.cu are `rejected` for real. The others (fp16 accumulation, a replay of the previous
output, flushed scales, division by the first scale, a copied expected output) can only be caught by running them:
without a GPU their source carries `// ksci-simulate: wrong`, which stands in for the harness's verification
(ksci/backends/simulated.py), and the verdict's message says "simulated". test_the_loop_on_a_gpu runs the same
loop on the real harness, with no directive, where every verdict is the harness's own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.fp8_gemm_script import FAILED_ONCE, PLAN, _design, _plan, demo_config_toml  # noqa: E402
from support.prefect_harness import on_shared_api  # noqa: E402
from support.scripted_llm_server import ScriptedLlmServer  # noqa: E402

from flows.evolve import evolve  # noqa: E402
from ksci.lineage.store import LineageStore, candidate_id_of  # noqa: E402
from ksci.llm.config import load_config  # noqa: E402
from ksci.problem.render import render_kernel  # noqa: E402
from ksci.problem.spec import load_problem  # noqa: E402
from ksci.report.facts import short_id  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = load_problem("fp8_gemm")
ADVERSARIAL = PROBLEM.root / "solutions" / "adversarial"
KEY = "sk-test-cheater"
SIMULATED_WRONG = "// ksci-simulate: wrong\n"
# Plan title -> (first answer, answer to the repair), each a file of the adversarial folder.
GEN1 = {
    "Accumulate each 128-wide K block in fp16": ("fp16_accumulation.cu", "memo_by_pointer.cu"),
    "Remember results between calls": ("memo_by_content_sample.cu", "copy_expected.cu"),
    "Overlap the GEMM with a side stream": ("side_stream.cu", "timer_patch.cu"),
}
GEN2 = {
    "Skip negligible scale blocks": ("flush_tiny_scales.cu", "divide_by_first_scale.cu"),
    "Hoist the row scale out of the K loop": ("divide_by_first_scale.cu", "fp16_accumulation.cu"),
    "Time only the useful work": ("timer_patch.cu", "side_stream.cu"),
}
RUNS_ON_THE_SCREEN = {"side_stream.cu", "timer_patch.cu"}  # `expect: rejected`: the screen's verdict is real here


def _kernel(name: str, simulate: bool) -> str:
    source = (ADVERSARIAL / name).read_text()
    return source if (name in RUNS_ON_THE_SCREEN or not simulate) else SIMULATED_WRONG + source


def _code(source: str) -> str:
    return f"Here is the faster kernel.\n\n```cuda\n{source}```\n"


def _plans(titles) -> list[dict]:
    numbers = [(7, 0, 30), (4, 5, 35), (3, 8, 20)]
    plans = [_plan(t, i, lo, hi, ["as the title says"]) for t, (i, lo, hi) in zip(titles, numbers, strict=True)]
    return plans + [_plan("Filler plan A", 1, 1, 5, ["nothing"]), _plan("Filler plan B", 1, 1, 4, ["nothing"])]


def cheating_script(simulate: bool) -> dict:
    seed_mma = render_kernel(PROBLEM.template("cuda", "mma"), {})
    seed_naive = render_kernel(PROBLEM.template("cuda", "naive"), {})
    choice = {"base_id": candidate_id_of(seed_mma), "reference_id": candidate_id_of(seed_naive), "reason": "fastest"}
    writer = []
    for plans in (GEN1, GEN2):
        for title, (first, repair) in plans.items():
            writer.append({"match": [PLAN + title, FAILED_ONCE], "content": _code(_kernel(repair, simulate))})
            writer.append({"match": PLAN + title, "content": _code(_kernel(first, simulate))})
    feedback = ["# Experiments already run on this Base", "- wrong (", "- rejected ("]
    finding = {"kind": "insight", "text": "Scripted finding.", "evidence": "-"}
    return {
        "selector": [{"json": choice, "repeat": True}],
        # Generation 2's design is answered only to a prompt that lists generation 1's failures on the same Base.
        "designer": [_design(_plans(GEN1)), {**_design(_plans(GEN2)), "match": feedback}],
        "writer": writer,
        "findings": [{"json": {"findings": [finding]}, "repeat": True}],
    }


@pytest.fixture(scope="module")
def harness(shared_prefect_api):
    with on_shared_api(shared_prefect_api):
        yield


def _run(tmp_path: Path, monkeypatch, simulate: bool):
    monkeypatch.setenv("KSCI_LLM_API_KEY", KEY)
    with ScriptedLlmServer(cheating_script(simulate)) as server:
        path = tmp_path / "ksci.toml"
        path.write_text(demo_config_toml(server.base_url, timeout_s=30.0, retry_delay_s=0.1))
        evolve(
            problem="fp8_gemm",
            target="cuda",
            generations=3,
            run="cheat",
            children=3,
            store_root=str(tmp_path / "store"),
            simulate="" if simulate else None,
            proposer="llm",
            llm=load_config(path, env={}),
        )
        designer_answers = [r["answer"] for r in server.requests if r["stage"] == "designer"]
    return LineageStore(tmp_path / "store").read("cheat"), designer_answers


def _ksci(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ksci.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=400
    )


def _assert_never_crowned(rows, tmp_path: Path, designer_answers: list) -> None:
    llm = rows[rows["proposer"] == "llm"]
    assert len(llm) == 12, llm[["generation", "status", "hypothesis"]].to_string()  # 2 generations x 3 plans x 2
    assert not (llm["status"] == "ok").any(), llm[["status", "message"]].to_string()
    # On a GPU the kernel that copies the expected output may fault instead (benchmarks/adversarial.py expects
    # runtime_error|wrong for it): a failure class either way.
    failing = {"wrong", "rejected", "runtime_error"}
    assert {"wrong", "rejected"} <= set(llm["status"]) <= failing, llm[["status", "message"]].to_string()
    cheats = set(llm["candidate_id"])
    ok = rows[rows["status"] == "ok"]
    best = ok.sort_values("geomean_us").iloc[0]
    assert best["candidate_id"] not in cheats and best["generation"] == 0  # the best is an honest seed
    assert designer_answers == [0, 1]  # generation 2's design answered the prompt that carried the failures
    store = str(tmp_path / "store")
    status = _ksci("status", "--run", "cheat", "--store", store)
    assert status.returncode == 0, status.stderr[-2000:]
    lines = status.stdout.splitlines()
    header = next(line.split() for line in lines if line.split()[:2] == ["gen", "cands"])
    for generation in (1, 2):  # each LLM generation: 4 wrong, 2 rejected, no ok, under their classes' columns
        row = next(line.split() for line in lines if line.split()[:1] == [str(generation)])
        counts = dict(zip(header, row, strict=False))
        failed = sum(int(counts.get(name, "0")) for name in ("wrong", "runtime_error"))
        assert failed == 4 and counts["rejected"] == "2" and counts.get("ok", "0") == "0", status.stdout
    assert short_id(best["candidate_id"]) in lines[-1] or short_id(best["candidate_id"]) in status.stdout
    report = tmp_path / "report.html"
    made = _ksci("report", "--run", "cheat", "--store", store, "-o", str(report))
    assert made.returncode == 0, made.stderr[-2000:]
    page = report.read_text()
    assert "wrong" in page and "rejected" in page
    assert "best" in page and short_id(best["candidate_id"]) in page


@pytest.mark.slow
def test_a_cheating_writer_is_never_recorded_ok_nor_best(tmp_path, monkeypatch, harness):
    rows, designer_answers = _run(tmp_path, monkeypatch, simulate=True)
    _assert_never_crowned(rows, tmp_path, designer_answers)
    llm = rows[rows["proposer"] == "llm"]
    rejected = llm[llm["status"] == "rejected"]
    assert len(rejected) == 4 and not rejected["message"].str.contains("simulated").any()  # the screen's, real
    wrong = llm[llm["status"] == "wrong"]
    assert len(wrong) == 8 and wrong["message"].str.contains("simulated").all()  # stand-ins for the GPU's check


@pytest.mark.gpu
def test_the_loop_on_a_gpu(tmp_path, monkeypatch, harness, gpu_target):
    """The same loop on the real harness: every `wrong` comes from verification, naming the profile that failed."""
    if gpu_target != "cuda":
        pytest.skip("the adversarial kernels are CUDA")
    rows, designer_answers = _run(tmp_path, monkeypatch, simulate=False)
    _assert_never_crowned(rows, tmp_path, designer_answers)
    wrong = rows[(rows["proposer"] == "llm") & (rows["status"] == "wrong")]
    assert wrong["message"].str.startswith("wrong on ").all(), wrong["message"].to_string()
