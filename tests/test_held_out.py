"""Shape contracts and held-out shapes (ksci/problem/contract.py): the schema's one-line errors, the draw, the
simulator's shape-table kernel, and that prompts and the report never show a held-out shape."""

from __future__ import annotations

import random

import pytest
from test_problem import _problem_folder, _set

from ksci.backends.simulated import SimulatedBackend
from ksci.evaluate.judge.classify import expected_reports
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CheckResult, Status, Verdict
from ksci.evaluate.stage_order import evaluate_source
from ksci.llm.prompts import render_messages
from ksci.problem.contract import contract_of, derived_contract, draw_held_out, hide_held_out, outside
from ksci.problem.render import render_kernel
from ksci.problem.spec import ProblemError, load_problem, shape_key
from ksci.proposers.scientist import failure_report
from ksci.report.facts import short_message

PROBLEMS = ("fp8_gemm", "fp8_gemm_kmajor", "rmsnorm")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("shape_contract.rows", {"min": 9, "max": 4}), "shape_contract.rows: max 4 is less than min 9"),
        (_set("shape_contract.rows", {"min": 1, "max": 9, "step": 2}), "shape_contract.rows.step: unknown key"),
        (_set("shape_contract.cols", {"min": 8, "max": 16384, "multiple_of": 0}), "greater than or equal to 1"),
        (_set("shape_contract.cols", {"min": 9, "max": 15, "multiple_of": 8}), "no multiple of 8 lies between 9"),
        (_set("shape_contract.cols", {"min": 8, "max": 4096, "multiple_of": 8}), "tests[2].cols = 5120 is outside"),
        (lambda s: s["shape_contract"].pop("cols"), "shape_contract names ['rows'], the shapes' dimensions are"),
        (_set("shape_contract.batch", {"min": 1, "max": 2}), "shape_contract names ['batch', 'cols', 'rows']"),
        (_set("shape_contract.rows", "any"), "shape_contract.rows: input should be a valid dictionary"),
    ],
)
def test_a_bad_contract_is_one_line(tmp_path, monkeypatch, edit, message):
    _problem_folder(tmp_path, edit=edit)
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    with pytest.raises(ProblemError) as caught:
        load_problem("toy")
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'toy' / 'problem.yaml'}: ") and message in text and "\n" not in text


@pytest.mark.parametrize("name", PROBLEMS)
def test_every_listed_shape_lies_in_the_shipped_contract(name):
    problem = load_problem(name)
    assert problem.shape_contract
    assert all(outside(problem.shape_contract, s) is None for s in (*problem.tests, *problem.benchmarks))


@pytest.mark.parametrize("name", PROBLEMS)
def test_held_out_shapes_are_in_contract_new_distinct_and_bounded(name):
    problem = load_problem(name)
    listed = {shape_key(s) for s in (*problem.tests, *problem.benchmarks)}
    contract = contract_of(problem)
    largest = max(_work(s, contract) for s in problem.tests)
    for seed in range(50):
        drawn = draw_held_out(problem, 3, random.Random(seed))
        assert len(drawn) == 3 and len({shape_key(s) for s in drawn}) == 3
        for shape in drawn:
            assert outside(contract, shape) is None and shape_key(shape) not in listed
            assert _work(shape, contract) <= largest and isinstance(shape["seed"], int)


def test_draws_differ_between_evaluations_and_reach_the_deep_end_of_k():
    problem = load_problem("fp8_gemm")
    draws = [draw_held_out(problem) for _ in range(20)]  # os.urandom: nothing shared between two evaluations
    assert len({str(d) for d in draws}) == 20
    # One shape of every draw has the longest listed reduction (K = 7168), where a bf16 running sum drifts most.
    assert all(any(s["k"] == 7168 for s in d) for d in draws)


def test_a_problem_without_a_contract_gets_one_from_its_listed_shapes(tmp_path, monkeypatch):
    _problem_folder(tmp_path, edit=lambda s: s.pop("shape_contract"))
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    problem = load_problem("toy")
    assert contract_of(problem) == {
        "rows": {"min": 1, "max": 32768, "multiple_of": 1},
        "cols": {"min": 1032, "max": 8192, "multiple_of": 8},
    }
    assert derived_contract([{"n": 64, "seed": 1}, {"n": 64, "seed": 2}]) == {
        "n": {"min": 64, "max": 64, "multiple_of": 64}
    }
    assert draw_held_out(problem, 2, random.Random(1))  # in the derived contract, not listed
    fixed = type("Fixed", (), {"tests": ({"n": 64, "seed": 1},), "benchmarks": (), "shape_contract": {}})()
    assert draw_held_out(fixed, 3, random.Random(1)) == []  # a contract of fixed dimensions has none to give


def _work(shape: dict, contract: dict) -> int:
    product = 1
    for key in contract:
        product *= max(1, shape[key])
    return product


# ---- the simulator: a shape-table kernel is wrong on a held-out shape, an honest one stays ok ----


def _simulated(problem_name: str, source: str, held_out: int = 3) -> Verdict:
    problem = load_problem(problem_name)
    options = EvaluationOptions(target="cuda", phases=("verify", "benchmark"), held_out=held_out)
    return evaluate_source(problem, source, options, backend=SimulatedBackend(None))


def test_a_shape_table_kernel_is_wrong_on_a_held_out_shape_and_an_honest_one_stays_ok():
    problem = load_problem("fp8_gemm")
    honest = render_kernel(problem.template("cuda", "mma"))
    table = "// ksci-simulate: shape_table\n" + honest
    verdict = _simulated("fp8_gemm", table)
    assert verdict.status == Status.WRONG and verdict.message.startswith("wrong on held-out shape ")
    drawn = verdict.fingerprint["held_out"]
    assert f"held-out shape {shape_key(drawn[0])} seed {drawn[0]['seed']}: " in verdict.message
    ok = _simulated("fp8_gemm", honest)
    assert ok.status == Status.OK and len(ok.fingerprint["held_out"]) == 3
    assert ok.fingerprint["held_out"] != verdict.fingerprint["held_out"]
    # Without held-out shapes the table is not found out: the listed shapes are all it is right on.
    assert _simulated("fp8_gemm", table, held_out=0).status == Status.OK


def test_an_ok_result_must_come_with_the_held_out_checks():
    problem = load_problem("fp8_gemm")
    options = EvaluationOptions(phases=("verify",))
    without, with_three = expected_reports(problem, options), expected_reports(problem, options, 3)
    assert with_three["checks"] - without["checks"] == 3 * 2  # spec and full_range, one input set each


# ---- what the LLM and the report are shown ----

MESSAGE = "wrong on held-out shape 320x4608x7168 seed 123456: on spec inputs: output 'c': 4 of 9 elements out"


def test_prompts_and_the_report_hide_held_out_shapes():
    assert "320x4608x7168" not in hide_held_out(MESSAGE) and "123456" not in hide_held_out(MESSAGE)
    assert hide_held_out(MESSAGE).startswith("wrong on a held-out shape: on spec inputs")
    assert "320x4608" not in short_message(MESSAGE)
    check = CheckResult({"m": 320, "n": 4608, "k": 7168}, 123456, False, "failing rows: 4 of 320", 4, 9, 1.0, 0)
    verdict = Verdict(Status.WRONG, "fp8_gemm", "cuda", MESSAGE, checks=[check])
    shown = failure_report(verdict)
    assert "320" not in shown and "123456" not in shown and "held-out shape" in shown


def test_a_rendered_prompt_never_holds_a_held_out_shape(tmp_path):
    (tmp_path / "probe.system.j2").write_text("system")
    (tmp_path / "probe.user.j2").write_text("the last verdict: {{ message }}")
    messages = render_messages("probe", {"message": MESSAGE}, tmp_path)
    assert "320x4608x7168" not in messages[1]["content"] and "a held-out shape" in messages[1]["content"]


def test_a_held_out_shape_goes_to_a_composed_kernels_default_variant():
    """A composed kernel dispatches the benchmark shapes it lists and sends any other shape to its default variant
    (ksci/problem/compose.py); a held-out shape is never listed, so the held-out checks test that fallback."""
    from test_compose import _fp8_plan

    from ksci.problem.compose import compose_kernel, composed_plan

    problem = load_problem("fp8_gemm")
    plan, _keys = _fp8_plan()
    source = compose_kernel(problem, "cuda", plan).source
    dispatched = set(composed_plan(source)["shapes"])
    for seed in range(20):
        assert not {shape_key(s) for s in draw_held_out(problem, 3, random.Random(seed))} & dispatched
    assert "// any other shape: the default variant" in source


def test_a_held_out_set_the_reference_cannot_make_counts_as_made_and_is_recorded():
    """A derived contract (an imported problem's) may draw a shape its reference refuses: the child reports it
    `skipped` with the reason, which stands in for its check, and the verdict's fingerprint records it."""
    from ksci.evaluate.judge.classify import classify
    from ksci.evaluate.run.isolate import ChildOutcome

    problem = load_problem("fp8_gemm")
    options = EvaluationOptions(phases=("verify",))
    check = {"event": "check", "shape": {"m": 64, "n": 64, "k": 128}, "seed": 1, "ok": True, "report": ""}
    check.update(mismatches=0, total=4096, max_abs_error=0.0, nan_or_inf=0)
    started = {"event": "started", "fingerprint": {"gpu": "NVIDIA H200"}}
    skipped = {"event": "skipped", "shape": {"m": 96, "n": 64, "k": 256}, "seed": 7, "reason": "ValueError: no"}
    expect = expected_reports(problem, options, 1)
    made = [check] * (expect["checks"] - 1)
    result = {"event": "result", "status": "ok"}

    def verdict(messages):
        outcome = ChildOutcome(messages=[started, {"event": "loaded"}, *messages, result], returncode=0, output="")
        return classify(problem, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"), expect)

    ok = verdict([*made, skipped])
    assert ok.status == Status.OK and ok.fingerprint["held_out_skipped"][0]["reason"] == "ValueError: no"
    assert verdict(made).status == Status.SUSPICIOUS  # one check short, nothing in its place
