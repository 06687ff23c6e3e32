"""A SCRIPT for the scripted LLM server (support.scripted_llm_server): two LLM generations of imported problems
that have no seed template (benchmarks/llm_imported_scripted.py, tests/test_llm_imported.py).

Generation 0 is written from the reference: the writer is asked for writer.FIRST_PLANS and answers with the
problem's hand-written correct kernel (tests/data/, tests/support/imported_problems.py), the second plan with the
same kernel at another block size. Generation 1 goes through the selector (the first kernel as Base, the second as
Reference), the designer (five plans, three kept) and the writer, who answers each plan with a variant of the Base.
Nothing here is a model's work; the answers only follow the prompts' format. Every answer repeats and is matched by
the problem's name and the plan's title, so one server serves several problems in any order.
"""

from __future__ import annotations

import re

from ksci.lineage.store import candidate_id_of
from ksci.llm.designer import Plan
from ksci.llm.writer import FIRST_PLANS, WrittenKernel, render_written
from support.fp8_gemm_script import DEMO_MODEL, PLAN, _code, _design, _plan
from support.imported_problems import kernels

GEN1 = [  # the titles say what the scripted answers are: variants of the Base, not the plans a model would make
    _plan("Scripted variant A of the Base", 6, 0, 25, ["the Base, tagged A"]),
    _plan("Scripted variant B of the Base", 3, 2, 15, ["the Base, tagged B"]),
    _plan("Scripted variant C of the Base", 5, 1, 10, ["the Base, tagged C"]),
    _plan("Filler plan E", 2, 0, 5, ["nothing"]),
    _plan("Filler plan F", 1, 0, 3, ["nothing"]),
]


def first_kernels(name: str) -> list[str]:
    """What the writer answers to FIRST_PLANS for problem `name`: its correct kernel, then a variant of it."""
    correct = kernels(name)["correct"].read_text()
    return [correct, _variant(correct, "a first fast kernel: the same code, tagged")]


def _variant(source: str, note: str) -> str:
    """The kernel with a comment line added (a distinct candidate; the same code), or a block size changed."""
    changed = re.sub(r"dim3 block\(128\)", "dim3 block(256)", source, count=1)
    return f"// scripted variant: {note}\n{changed}"


def written_id(code: str, plan: Plan, parent_id: str | None, reference_id: str | None) -> str:
    """The candidate id of the kernel the flow renders from the writer's answer `code` (attempt 1)."""
    kernel = WrittenKernel(re.sub(r"^[ \t]*// ksci: .*\n?", "", code, flags=re.M).strip("\n") + "\n", "source")
    return candidate_id_of(render_written(kernel, "cuda", DEMO_MODEL, plan, parent_id, reference_id, 1))


def imported_script(names: list[str]) -> dict:
    """Answers for every stage, for each of the problems `names` (imported, without seed templates)."""
    selector, designer, writer, findings = [], [], [], []
    finding = {
        "kind": "insight",
        "text": "Scripted finding: the first kernels from the reference work.",
        "evidence": "-",
    }
    for name in names:
        problem = f"# Problem: {name} (cuda)"
        first, fast = first_kernels(name)
        base = written_id(first, FIRST_PLANS[0], None, None)
        reference = written_id(fast, FIRST_PLANS[1], None, None)
        choice = {"base_id": base, "reference_id": reference, "reason": "scripted: the first kernel from the reference"}
        selector.append({"match": f"Problem: {name} on cuda", "json": choice, "repeat": True})
        designer.append({**_design(GEN1), "match": problem, "repeat": True})
        for plan, source in zip(FIRST_PLANS, (first, fast), strict=True):
            writer.append({"match": [problem, PLAN + plan.title], "content": _code(source), "repeat": True})
        for plan in GEN1[:3]:
            variant = _variant(first, f"generation 1, {plan['title']}")
            writer.append({"match": [problem, PLAN + plan["title"]], "content": _code(variant), "repeat": True})
        findings.append({"match": f"Problem: {name} on cuda", "json": {"findings": [finding]}, "repeat": True})
    return {"selector": selector, "designer": designer, "writer": writer, "findings": findings}
