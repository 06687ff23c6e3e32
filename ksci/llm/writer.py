"""Stage 3, the kernel writer: from Base and Reference code, the problem statement, the reference implementation,
the entry-point contract, one plan and the feedback of failed attempts, the LLM writes the new kernel, as a whole
source in a code block or as SEARCH/REPLACE edits of the Base. The answer is rendered into the problem's harness
template (templates/writer/<dialect>.j2), which puts a provenance header on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import jinja2

from ksci import PROJECT_ROOT
from ksci.llm.designer import Experiment, Plan
from ksci.llm.knowledge import Knowledge
from ksci.llm.parse import apply_edits, extract_code, parse_edits
from ksci.llm.prompts import render_messages, stage_marker
from ksci.llm.request import StageRequest
from ksci.llm.secrets import safe_label
from ksci.problem.spec import Problem, has_entry_point

WRITER_TEMPLATES = PROJECT_ROOT / "templates" / "writer"
FEEDBACK_CHARS = 3000  # tail of a compile log or mismatch report fed back
_PROVENANCE_LINE = re.compile(r"^[ \t]*// ksci: .*\n?", re.M)


@dataclass(frozen=True)
class Feedback:
    """A failed attempt at this plan: the kernel it produced (if any) and what went wrong."""

    attempt: int
    status: str  # compile_error, wrong, unusable, ...
    report: str  # compile log, mismatch report, or why the answer was unusable
    source: str = ""


@dataclass(frozen=True)
class WrittenKernel:
    code: str
    form: str  # "source" (a whole file) or "edits" (SEARCH/REPLACE applied to the Base)


# Generation 0 of a problem without seed templates: the writer's plans, from the reference alone.
FIRST_PLANS = (
    Plan(
        "A first correct kernel from the reference",
        "Implement the reference exactly and simply: one thread per output element (a block per row where a row is "
        "reduced), every shape handled, the tails included. Correctness first; it is the start of the lineage.",
        ("follow the reference's arithmetic and dtypes", "bounds checks on every dimension"),
        0.0,
        0.0,
        1.0,
        kept_as="generation 0 from the reference",
    ),
    Plan(
        "A first fast kernel from the reference",
        "Implement the reference with the usual structure for its kind of work: shared-memory tiles for products "
        "and convolutions, a block per row with a tree reduction for reductions and normalisations, wide "
        "vectorised loads for element-wise work. It must still be exactly right on every shape.",
        ("tile or vectorise as the operation suits", "bounds checks on every dimension"),
        0.0,
        0.0,
        5.0,
        kept_as="generation 0 from the reference",
    ),
)


def entry_contract(problem: Problem, target: str) -> dict:
    return {
        "signature": problem.entry_signature,
        "args": ", ".join(problem.entry_args),
        "outputs": ", ".join(problem.outputs),
        "dtypes": problem.dtypes.get(target, {}),
    }


@dataclass(frozen=True)
class Workbench:
    """What every write of one generation shares: the problem and target, the Base and Reference kernels ({"id",
    "source", "geomean", "hypothesis", ...}; None when writing from the reference implementation), the knowledge,
    and the prompt folder."""

    problem: Problem
    target: str
    dialect: str
    base: dict | None
    reference: dict | None
    knowledge: Knowledge
    prompts_dir: str | None = None


def build_request(
    bench: Workbench, plan: Plan, feedback: list[Feedback], past_failures: list[Experiment], slot: str
) -> StageRequest:
    problem, target, dialect, base = bench.problem, bench.target, bench.dialect, bench.base
    values = {
        "marker": stage_marker("writer"),
        "problem": problem,
        "target": target,
        "dialect": dialect,
        "language": "HIP C++" if dialect == "hip" else "CUDA C++",
        "base": base,
        "reference": bench.reference,
        "plan": plan,
        "knowledge": bench.knowledge,
        "reference_implementation": problem.reference_text(),
        "contract": entry_contract(problem, target),
        "feedback": [_trimmed(f) for f in feedback],
        "past_failures": past_failures,
    }
    messages = render_messages("writer", values, bench.prompts_dir)
    context = {"base_source": base["source"] if base else "", "entry_name": problem.entry_name}
    return StageRequest("writer", slot, messages, None, context)


def _trimmed(feedback: Feedback) -> Feedback:
    return Feedback(feedback.attempt, feedback.status, feedback.report[-FEEDBACK_CHARS:], feedback.source)


def parse_answer(text: str, context: dict) -> tuple[WrittenKernel | None, str | None]:
    """A whole source (the longest code block) or edits of the Base; it must define the entry point."""
    edits = parse_edits(text)
    if edits:
        code, problem = apply_edits(context["base_source"], edits)
        form = "edits"
    else:
        code, problem = extract_code(text)
        form = "source"
    if problem:
        return None, problem
    code = _PROVENANCE_LINE.sub("", code)  # a copied header would claim the wrong origin
    if not has_entry_point(code, context["entry_name"]):
        return None, f'the code does not define the entry point extern "C" {context["entry_name"]}(...)'
    return WrittenKernel(code.strip("\n") + "\n", form), None


def comment_text(text: str, limit: int = 200) -> str:
    """LLM text fit for a // comment: one line (a newline would end the comment and start code), no backslash (one
    at the end continues the comment onto the next line), no control characters."""
    line = " ".join(text.replace("\\", "/").split())
    return "".join(c for c in line if c.isprintable())[:limit]


def render_written(
    kernel: WrittenKernel,
    dialect: str,
    model: str,
    plan: Plan,
    parent_id: str | None,
    reference_id: str | None,
    attempt: int,
) -> str:
    """The written code inside the dialect's harness template, with where it came from: the model's name only as a
    sanitised label (ksci.llm.secrets.safe_label), the plan's title as one comment line."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(WRITER_TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(f"{dialect}.j2").render(
        code=kernel.code,
        form=kernel.form,
        model=safe_label(model),
        plan_title=comment_text(plan.title),
        parent_id=parent_id or "the reference",
        reference_id=reference_id or "none",
        attempt=attempt,
    )
