"""Golden files of the four stages' prompts, rendered from fixed inputs, and what each must contain: what the
paper feeds that stage. Regenerate the files after a deliberate change: KSCI_UPDATE_GOLDEN=1 pytest this file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from ksci.lineage.store import Candidate, empty_frame
from ksci.llm import designer, findings, selector, writer
from ksci.llm.knowledge import load_knowledge
from ksci.problem.spec import load_problem, shape_key

GOLDEN = Path(__file__).parent / "golden" / "prompts"
PROBLEM = load_problem("fp8_gemm")
SHAPES = [shape_key(s) for s in PROBLEM.benchmarks]
BASE_SOURCE = 'extern "C" int fp8_gemm(/* base */) { return 0; }  // BASE-CODE\n'
REFERENCE_SOURCE = 'extern "C" int fp8_gemm(/* ref */) { return 0; }  // REFERENCE-CODE\n'
PLAN = designer.Plan(
    "Warp-specialised wgmma", "Use wgmma with TMA.", ("add TMA loads", "use wgmma"), 10, 60, 8, "most innovative"
)


def _row(cid, parent, generation, status, geomean, hypothesis, message=""):
    times = {s: geomean * (1 + i / 10) for i, s in enumerate(SHAPES)} if geomean else {}
    return Candidate(
        run="golden",
        problem="fp8_gemm",
        generation=generation,
        candidate_id=cid,
        parent_id=parent,
        proposer="seed" if parent is None else "llm",
        hypothesis=hypothesis,
        template="mma" if parent is None else None,
        source_path=f"sources/{cid[:2]}/{cid}.cu",
        target="cuda",
        status=status,
        message=message,
        geomean_us=geomean,
        shape_times_json=json.dumps(times),
    )


def _population() -> pd.DataFrame:
    rows = [
        _row("aaaaaaaaaaaaaaaa", None, 0, "ok", 200.0, "mma seed HYPOTHESIS-SEED"),
        _row("bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa", 1, "ok", 150.0, "64-row tiles HYPOTHESIS-CHILD"),
        _row("cccccccccccccccc", "aaaaaaaaaaaaaaaa", 1, "compile_error", None, "wgmma try", "error: VERDICT-MESSAGE"),
    ]
    frame = pd.DataFrame([r.__dict__ for r in rows])
    return pd.concat([empty_frame(), frame], ignore_index=True)


def _messages(stage: str) -> list[dict]:
    knowledge = load_knowledge(PROBLEM, "cuda")
    base = {
        "id": "bbbbbbbbbbbbbbbb",
        "source": BASE_SOURCE,
        "geomean": "150.00 us",
        "hypothesis": "64-row tiles",
        "language": "cuda",
    }
    reference = {
        "id": "aaaaaaaaaaaaaaaa",
        "source": REFERENCE_SOURCE,
        "geomean": "200.00 us",
        "hypothesis": "seed",
        "language": "cuda",
    }
    experiments = [designer.Experiment("wgmma try", "compile_error", "error: EXPERIMENT-RESULT")]
    if stage == "selector":
        return selector.build_request(_population(), PROBLEM, "cuda").messages
    if stage == "designer":
        return designer.build_request(
            PROBLEM, "cuda", base, reference, knowledge, ["[generation 1, worked] FINDING-ONE"], experiments
        ).messages
    if stage == "writer":
        feedback = [
            writer.Feedback(1, "compile_error", "error: identifier COMPILE-LOG is undefined", "// FAILED-SOURCE")
        ]
        bench = writer.Workbench(PROBLEM, "cuda", "cuda", base, reference, knowledge)
        return writer.build_request(bench, PLAN, feedback, experiments, slot="plan-0/attempt-2").messages
    rows = [
        {
            "candidate_id": "dddddddddddddddd",
            "parent_id": "bbbbbbbbbbbbbbbb",
            "status": "ok",
            "geomean_us": 120.0,
            "hypothesis": "RESULT-HYPOTHESIS",
            "message": "",
        },
    ]
    return findings.build_request(
        PROBLEM, "cuda", 2, findings.outcomes(rows, _population()), ["[generation 1, worked] EARLIER-FINDING"]
    ).messages


def _text(messages: list[dict]) -> str:
    return "".join(f"===== {m['role']} =====\n{m['content']}" for m in messages)


@pytest.mark.parametrize("stage", ["selector", "designer", "writer", "findings"])
def test_prompt_matches_its_golden_file(stage):
    text = _text(_messages(stage))
    path = GOLDEN / f"{stage}.txt"
    if os.environ.get("KSCI_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{stage} prompt changed; if on purpose: KSCI_UPDATE_GOLDEN=1 pytest {__file__}"


def test_selector_sees_ids_parents_per_shape_times_verdicts_and_hypotheses():
    text = _text(_messages("selector"))
    assert "[ksci stage: selector]" in text
    assert "| bbbbbbbbbbbbbbbb | aaaaaaaaaaaaaaaa | 1 | llm | 150.00 | 150.0 | 165.0 |" in text  # id, parent, times
    assert all(shape in text for shape in SHAPES)
    assert "cccccccccccccccc (parent aaaaaaaaaaaaaaaa, generation 1): compile_error: error: VERDICT-MESSAGE" in text
    assert "HYPOTHESIS-SEED" in text and "HYPOTHESIS-CHILD" in text
    assert "Base" in text and "Reference" in text


def test_designer_sees_base_code_knowledge_findings_and_asks_for_10_avenues_and_5_plans():
    text = _text(_messages("designer"))
    assert "BASE-CODE" in text and "FINDING-ONE" in text and "EXPERIMENT-RESULT" in text
    assert "wgmma" in text and "K-major" in text  # the Hopper notes
    assert "per 128-wide K block" in text or "128-wide K step" in text  # the problem notes
    assert "list 10 avenues of research" in text.lower() and "write 5 experiment plans" in text.lower()
    for field in ("rubric", "min_uplift_pct", "max_uplift_pct", "innovation", "description"):
        assert field in text


def test_writer_sees_base_and_reference_code_problem_reference_contract_plan_and_feedback():
    text = _text(_messages("writer"))
    assert "BASE-CODE" in text and "REFERENCE-CODE" in text
    assert PROBLEM.description.splitlines()[0] in text
    assert "def reference(inputs: dict) -> dict:" in text  # the PyTorch reference implementation
    assert PROBLEM.entry_signature in text and "a, b, a_scale, b_scale, c, m, n, k, stream" in text
    assert "Warp-specialised wgmma" in text and "- add TMA loads" in text and "10% to 60%" in text
    assert "attempt 1 failed: compile_error" in text and "COMPILE-LOG" in text and "FAILED-SOURCE" in text
    assert "SEARCH" in text and "REPLACE" in text


def test_findings_sees_the_generation_results_against_parents_and_earlier_findings():
    text = _text(_messages("findings"))
    assert (
        "dddddddddddddddd (parent bbbbbbbbbbbbbbbb): ok; geomean 120.00 us vs parent 150.00 us (+20.0% vs parent)"
        in text
    )
    assert "RESULT-HYPOTHESIS" in text and "EARLIER-FINDING" in text


def test_a_user_prompt_folder_overrides_a_template(tmp_path):
    (tmp_path / "selector.user.j2").write_text("My own listing: {{ timed | length }} timed kernels.\n")
    messages = selector.build_request(_population(), PROBLEM, "cuda", prompts_dir=tmp_path).messages
    assert messages[1]["content"] == "My own listing: 2 timed kernels.\n"
    assert messages[0]["content"].startswith("[ksci stage: selector]")  # the system prompt is still the shipped one
