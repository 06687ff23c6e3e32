"""A SCRIPT for the scripted LLM server (support.scripted_llm_server): two LLM generations of fp8_gemm on
CUDA (sm_90a), for the end-to-end demo (benchmarks/llm_evolve_scripted.py) and the flow tests.

The kernels it "writes" are real: the shipped correct solutions, the mma seed template rendered at other points,
and SEARCH/REPLACE edits of the Base. Nothing here is a model's work; the answers only follow the prompts' format.
It also misbehaves on purpose, to show that a bad answer costs only its candidate:
  generation 1: plan 1's writer gets a 429 first (retried); plan 3's writer times out first (retried);
  generation 2: the designer's first answer is malformed JSON (asked again); plan 2's first kernel does not
  compile (repaired with the compile log); plan 3's first answer is prose without code (repaired); the findings
  answer is truncated (no findings stored for generation 2).
Generation 0 is the seed templates, as in every run.
`steady_script` is a second script that behaves well and answers in any order (for the fault tests).
"""

from __future__ import annotations

from ksci.lineage.store import candidate_id_of
from ksci.llm import writer
from ksci.llm.designer import Plan
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

DEMO_MODEL = "scripted-demo"
DEMO_TIMEOUT_S = 10.0  # the client timeout the demo config sets; the scripted sleep outlasts it
PLAN = "# The plan to implement: "
FAILED_ONCE = "# Your attempt 1 failed"


def _mma(**params) -> str:
    """The mma seed at a parameter point, without its provenance line (the writer's answer is free-form code)."""
    problem = load_problem("fp8_gemm")
    source = render_kernel(problem.template("cuda", "mma"), params)
    return source.split("\n", 1)[1]


def _solution(name: str) -> str:
    return (load_problem("fp8_gemm").root / "solutions" / "correct" / name).read_text()


def _plan(title: str, innovation: float, low: float, high: float, rubric: list[str]) -> dict:
    return {
        "title": title,
        "description": f"{title}. Scripted plan for the demo; the numbers are placeholders, not estimates.",
        "rubric": rubric,
        "min_uplift_pct": low,
        "max_uplift_pct": high,
        "innovation": innovation,
    }


def _design(plans: list[dict]) -> dict:
    return {"json": {"avenues": [f"scripted avenue {i}" for i in range(1, 11)], "plans": plans}}


def _code(source: str) -> str:
    return f"Here is the kernel.\n\n```cuda\n{source}```\n"


def _written_id(source: str, plan: dict, parent_id: str, reference_id: str) -> str:
    """The candidate id generation 1's writer answer `_code(source)` for `plan` is recorded under: the id of the code
    in the writer's harness template with its provenance lines (ksci.llm.writer.render_written), first attempt."""
    problem = load_problem("fp8_gemm")
    kernel, why = writer.parse_answer(_code(source), {"entry_name": problem.entry_name, "base_source": None})
    assert kernel is not None, why
    return candidate_id_of(writer.render_written(kernel, "cuda", DEMO_MODEL, Plan(**plan), parent_id, reference_id, 1))


GEN1 = [
    _plan("Square 128 x 128 block tiles with 16 warps", 7, 0, 30, ["BM = BN = 128", "WARPS_M = WARPS_N = 4"]),
    _plan("64-row block tiles with 2 x 4 warps", 4, 5, 35, ["BM = 64, BN = 128", "WARPS_M = 2, WARPS_N = 4"]),
    _plan("Halve the M tile of the Base", 3, 8, 20, ["BM 128 -> 64", "WARPS_M 4 -> 2"]),
    _plan("Filler plan A", 5, 2, 15, ["nothing"]),
    _plan("Filler plan B", 1, 1, 10, ["nothing"]),
]
GEN2 = [
    _plan("128 x 128 tiles with 8 warps", 8, 0, 30, ["BM = BN = 128", "WARPS_M = 2, WARPS_N = 4"]),
    _plan("CUDA-core tiles decoded to float in shared memory", 5, 0, 40, ["decode fp8 to float in smem"]),
    _plan("Single-stage K loop", 3, 6, 12, ["STAGES 2 -> 1"]),
    _plan("Filler plan C", 2, 1, 10, ["nothing"]),
    _plan("Filler plan D", 1, 2, 5, ["nothing"]),
]


def demo_script(timeout_s: float = DEMO_TIMEOUT_S) -> dict:
    seed_mma = render_kernel(load_problem("fp8_gemm").template("cuda", "mma"), {})
    seed_naive = render_kernel(load_problem("fp8_gemm").template("cuda", "naive"), {})
    tuned = _solution("mma_tuned.cu")
    broken = _mma(BM=128, BN=128, WARPS_M=2, WARPS_N=4, STAGES=2).replace(
        "acc[i][j][0] += part[i][j][0] * sa[i][0];", "acc[i][j][0] += part[i][j][0] * sa_undeclared[i][0];"
    )
    assert "sa_undeclared" in broken
    broken = "// ksci-simulate: compile_error\n" + broken  # so that --simulate fails it too (nvcc fails it anyway)
    halve_m = (
        "<<<<<<< SEARCH\nconstexpr int BM = 128;\n=======\nconstexpr int BM = 64;\n>>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\nconstexpr int WARPS_M = 4;\n=======\nconstexpr int WARPS_M = 2;\n>>>>>>> REPLACE\n"
    )
    one_stage = "<<<<<<< SEARCH\nconstexpr int STAGES = 2;\n=======\nconstexpr int STAGES = 1;\n>>>>>>> REPLACE\n"
    g1, g2 = (p["title"] for p in GEN1[:3]), (p["title"] for p in GEN2[:3])
    (g1_square, g1_rows, g1_halve), (g2_square, g2_cores, g2_single) = g1, g2
    selector = [
        {
            "json": {
                "base_id": candidate_id_of(seed_mma),
                "reference_id": candidate_id_of(seed_naive),
                "reason": "the tensor-core seed is fastest; the naive seed is the other family",
            }
        },
        {
            "json": {
                "base_id": _written_id(tuned, GEN1[1], candidate_id_of(seed_mma), candidate_id_of(seed_naive)),
                "reference_id": candidate_id_of(seed_mma),
                "reason": "scripted: continue from the 64-row tiles of generation 1",
            }
        },
    ]
    designer = [
        _design(GEN1),
        {"content": '{"avenues": ["scripted avenue 1"], "plans": [{"title": "cut off'},  # malformed JSON
        _design(GEN2),
    ]
    writer = [
        {"match": PLAN + g1_square, "content": _code(_mma(BM=128, BN=128, WARPS_M=4, WARPS_N=4, STAGES=2))},
        {"match": PLAN + g1_rows, "status": 429, "content": "scripted rate limit"},
        {"match": PLAN + g1_rows, "content": _code(tuned)},
        {"match": PLAN + g1_halve, "sleep": timeout_s + 2, "content": "too late"},
        {"match": PLAN + g1_halve, "content": "Two edits of the Base:\n\n" + halve_m},
        {"match": PLAN + g2_square, "content": _code(broken)},
        {"match": [PLAN + g2_square, FAILED_ONCE], "content": _code(_mma(BM=128, BN=128, WARPS_M=2, WARPS_N=4))},
        {"match": PLAN + g2_cores, "content": "I would decode the operands to float first; that should help."},
        {"match": [PLAN + g2_cores, FAILED_ONCE], "content": _code(_solution("smem_tiled.cu"))},
        {"match": PLAN + g2_single, "content": one_stage},
    ]
    findings = [
        {
            "json": {
                "findings": [
                    {"kind": "insight", "text": "Scripted finding: tile shape changes were tried.", "evidence": "-"}
                ]
            }
        },
        {"content": '{"findings": [{"kind": "worked", "text": "cut', "finish_reason": "length"},
    ]
    return {"selector": selector, "designer": designer, "writer": writer, "findings": findings}


def demo_config_toml(base_url: str, timeout_s: float = DEMO_TIMEOUT_S, retry_delay_s: float = 1.0) -> str:
    """An LLM config for the demo: the scripted server, demo prices (not any provider's), a budget it stays under."""
    return f"""[llm]
base_url = "{base_url}"
api_key_env = "KSCI_LLM_API_KEY"
model = "{DEMO_MODEL}"
timeout_s = {timeout_s}
retries = 3
retry_delay_s = {retry_delay_s}
repairs = 1
budget_usd = 10.0

[llm.prices.{DEMO_MODEL}]
prompt = 1.0
completion = 4.0
"""


def steady_script(design_sleep_s: float = 0.0) -> dict:
    """A SCRIPT whose every answer repeats and matches by content, not by order: any number of LLM generations,
    and a server restarted mid-run (a fresh server, its script unused) answers the rerun as the first would have.

    The selector always picks the mma seed as Base; the designer always keeps GEN1's first three plans; each plan's
    writer answers with its own real kernel, whatever the generation. `design_sleep_s` holds the designer's answer
    back that long after the request arrived (the fault test stops the server in that window; the answer is still
    delivered on the connection already open)."""
    seed_mma = render_kernel(load_problem("fp8_gemm").template("cuda", "mma"), {})
    seed_naive = render_kernel(load_problem("fp8_gemm").template("cuda", "naive"), {})
    square, rows, halve = (p["title"] for p in GEN1[:3])
    choice = {"base_id": candidate_id_of(seed_mma), "reference_id": candidate_id_of(seed_naive), "reason": "steady"}
    finding = {"kind": "insight", "text": "Scripted finding: tile shapes were tried.", "evidence": "-"}
    return {
        "selector": [{"json": choice, "repeat": True}],
        "designer": [{**_design(GEN1), "sleep": design_sleep_s, "repeat": True}],
        "writer": [
            {"match": PLAN + square, "content": _code(_mma(BM=128, BN=128, WARPS_M=4, WARPS_N=4)), "repeat": True},
            {"match": PLAN + rows, "content": _code(_solution("mma_tuned.cu")), "repeat": True},
            {"match": PLAN + halve, "content": _code(_mma(BM=64, BN=64, WARPS_M=2, WARPS_N=2)), "repeat": True},
        ],
        "findings": [{"json": {"findings": [finding]}, "repeat": True}],
    }
