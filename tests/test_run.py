"""ksci.run.RunSpec: one object for an evolution's settings, checked in one place, that travels as a Prefect flow
parameter (a deployment's JSON too); the progress line and the candidate count the run loop uses."""

from __future__ import annotations

import inspect
import json
import re
import shutil
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.identity import RunIdentity, claim_run, identity_of, read_identity
from ksci.lineage.store import Candidate, LineageStore
from ksci.problem.spec import load_problem
from ksci.run import (
    LIMIT_PARAMETERS,
    RunLimits,
    RunSpec,
    budget_problem,
    candidates_before,
    limits_problem,
    output_file_problem,
    progress_line,
)

ROOT = Path(__file__).resolve().parent.parent


def test_the_evolve_flows_parameters_are_the_specs_fields_flat():
    """The deployments set RunSpec's fields one by one (prefect.yaml, `-p generations=3`): the evolve flow's
    signature must name each of them, and nothing else but the LLM configuration object."""
    from flows.evolve import evolve

    names = set(inspect.signature(evolve.fn).parameters)
    spec_fields = {f.name for f in fields(RunSpec)} - {"limits"}
    assert names == spec_fields | set(LIMIT_PARAMETERS) | {"llm"}


def test_flat_parameters_round_trip_and_fill_in_a_run_name_and_gpus():
    spec = RunSpec.from_parameters({"problem": "fp8_gemm", "target": "cuda", "max_candidates": 5, "gpus": [0, "1"]})
    assert spec.run.startswith("fp8_gemm-cuda-") and spec.gpus == ("0", "1")
    assert spec.limits == RunLimits(max_candidates=5)
    assert RunSpec.from_parameters(spec.parameters()) == spec
    assert RunSpec.from_parameters({"problem": "p", "gpus": None}).gpus == ("0",)


def test_a_spec_survives_a_deployments_json_parameters():
    """What _generation_on_a_worker sends, as the worker's flow validates it back into a RunSpec."""
    from flows.evolve import evolve_generation

    spec = RunSpec(problem="fp8_gemm", run="r", gpus=("0", "1"), simulate="", limits=RunLimits(7, 60.0))
    sent = json.loads(json.dumps({"spec": asdict(spec), "generation": 2}))
    assert evolve_generation.validate_parameters(sent)["spec"] == spec


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"proposer": "magic"}, "proposer 'magic': expected one of 'tuning', 'llm'"),
        ({"overlap": -1}, "overlap -1: expected 0 or more"),
        ({"overlap": 1, "proposer": "llm"}, "overlap 1: expected 0 or more, and 0 with the llm proposer"),
    ],
)
def test_nonsense_settings_are_refused_in_one_place(settings, message):
    with pytest.raises(ValueError, match=message):
        RunSpec(problem="fp8_gemm", run="r", **settings)


def test_a_spec_gives_its_evaluation_setup_and_runs_on_workers_only_without_overlap():
    spec = RunSpec(problem="p", run="r", target="rocm", store_root="s", arch="gfx942", gpus=["2"], simulate="x")
    assert spec.evaluation() == EvaluationSetup("p", "rocm", "s", "gfx942", ("2",), "x")
    deployed = RunSpec(problem="p", run="r", generation_deployment="evolve-generation/generation")
    assert deployed.on_workers and not RunSpec(**{**deployed.__dict__, "overlap": 1}).on_workers


def test_the_terminal_progress_line_shows_the_best_so_far():
    rows = [{"status": "ok", "geomean_us": 250.0}, {"status": "wrong", "geomean_us": None}]
    line = progress_line([{"rows": rows}, {"rows": [{"status": "ok", "geomean_us": 234.5}]}], 5)
    assert line == "[############------------------] generation 2/5: best so far 234.50 us"
    assert progress_line([{"rows": rows[1:]}], 2).endswith("generation 1/2: nothing has passed yet")


def test_the_candidate_cap_counts_recorded_generations_before_and_the_ones_still_running(tmp_path):
    store = LineageStore(tmp_path)
    store.append(
        [
            Candidate(run="r", problem="p", generation=g, candidate_id=f"{g}{i}".ljust(16, "0"), proposer="seed",
                      source_path="s", target="cuda", status="ok")
            for g in (0, 1, 2) for i in range(3)
        ]
    )  # fmt: skip
    capped = RunSpec(problem="p", run="r", store_root=str(tmp_path), limits=RunLimits(max_candidates=10))
    assert candidates_before(capped, 2) == 6  # generation 2's own rows (a rerun's) do not count
    assert candidates_before(capped, 3, running={2: 4}) == 6 + 4  # generation 2 runs: its children count
    assert candidates_before(RunSpec(problem="p", run="r", store_root=str(tmp_path)), 3) == 0  # no cap: not read


# ---- settings checked in one place (issue 26): what the command line refuses before Prefect starts ----


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"run": "../escape"}, "invalid run name '../escape'"),
        ({"run": "a/b"}, "invalid run name 'a/b'"),
        ({"run": ""}, "invalid run name ''"),
        ({"run": "sources"}, "invalid run name 'sources'"),
        ({"run": "x" * 101}, "at most 100 characters"),
        ({"strategy": "bogus"}, "--strategy must be one of diverse, elitist, tournament (got 'bogus')"),
        ({"seed": -1}, "--seed must be 0 to 4294967295"),
        ({"generations": 0}, "--generations and --children must be at least 1"),
        ({"target": "metal"}, "target 'metal': expected cuda or rocm"),
    ],
)
def test_a_spec_refuses_what_no_run_can_use(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RunSpec(problem="fp8_gemm", **{"run": "r", **settings})


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0])
def test_a_time_limit_must_be_a_finite_number_of_seconds(seconds):
    with pytest.raises(ValueError, match="time_limit_s"):
        RunLimits(time_limit_s=seconds)


def test_the_small_checks_say_what_is_wrong_in_one_line(tmp_path):
    assert limits_problem(None, float("nan")) == "--time-limit must be at least 0 minutes, a finite number (got nan)"
    assert limits_problem(0, None) == "--max-candidates must be at least 1 (got 0)"
    assert limits_problem(5, 0.0) is None
    assert budget_problem(0, None) == "--budget-tokens must be at least 1 (got 0)"
    assert budget_problem(None, -1.0) == "--budget-usd must be a finite amount above 0 dollars (got -1.0)"
    assert budget_problem(None, float("inf")) and budget_problem(1000, 0.5) is None
    assert (
        output_file_problem(tmp_path / "missing" / "x.html")
        == f"cannot write {tmp_path}/missing/x.html: no folder {tmp_path}/missing"
    )
    assert output_file_problem(tmp_path) == f"{tmp_path} is a folder; give a file name"
    assert output_file_problem(tmp_path / "x.html") is None


# ---- a run's identity (issue 26): --run with another problem, target, settings or templates is refused ----


def _rows(run: str, problem: str = "fp8_gemm") -> list[Candidate]:
    return [
        Candidate(run=run, problem=problem, generation=0, candidate_id=f"{i}".ljust(16, "0"), proposer="seed",
                  source_path="s", target="cuda", status="ok")
        for i in range(2)
    ]  # fmt: skip


def _identity(problem: str = "fp8_gemm", **settings) -> RunIdentity:
    values = {"target": "cuda", "arch": None, "proposer": "tuning", "strategy": "elitist", "simulate": "", **settings}
    return identity_of(load_problem(problem), **values)


def test_a_run_without_an_identity_is_accepted_and_gets_one(tmp_path):
    store = LineageStore(tmp_path)
    store.append(_rows("old"))  # a store older than identity.json
    assert read_identity(store, "old") is None
    assert claim_run(store, "old", _identity()) is None
    assert read_identity(store, "old") == _identity()
    assert claim_run(store, "old", _identity()) is None  # the same settings again: accepted


@pytest.mark.parametrize(
    ("wanted", "said"),
    [
        ({"problem": "rmsnorm"}, "this command asks for problem rmsnorm (the run has fp8_gemm)"),
        ({"target": "rocm"}, "target rocm (the run has cuda)"),
        ({"strategy": "diverse"}, "strategy diverse (the run has elitist)"),
        ({"arch": "sm_80"}, "arch sm_80 (the run has default)"),
        ({"simulate": None}, "timings measured (the run has simulated (made-up))"),
    ],
)
def test_another_problem_or_setting_on_a_run_with_candidates_is_refused_naming_it(tmp_path, wanted, said):
    store = LineageStore(tmp_path)
    store.append(_rows("mix"))
    assert claim_run(store, "mix", _identity()) is None
    refusal = claim_run(store, "mix", _identity(**wanted))
    assert refusal.startswith("run 'mix' is fp8_gemm on cuda, tuning proposer, elitist, simulated (made-up); ")
    assert said in refusal and "\n" not in refusal
    assert read_identity(store, "mix") == _identity()  # not overwritten


def test_a_changed_template_is_a_different_run(tmp_path, monkeypatch):
    folder = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels" / "rmsnorm", folder / "rmsnorm", ignore=shutil.ignore_patterns("solutions"))
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(folder))
    store = LineageStore(tmp_path / "runs")
    store.append(_rows("r", "rmsnorm"))
    assert claim_run(store, "r", _identity("rmsnorm")) is None
    naive = folder / "rmsnorm" / "templates" / "cuda" / "naive.cu.j2"
    naive.write_text(naive.read_text() + "// changed\n")
    assert "template cuda/naive has changed since the run started" in claim_run(store, "r", _identity("rmsnorm"))


def test_a_run_that_recorded_nothing_takes_the_new_identity(tmp_path):
    store = LineageStore(tmp_path)
    assert claim_run(store, "fresh", _identity()) is None  # written, no candidates yet (Prefect never started)
    assert claim_run(store, "fresh", _identity("rmsnorm")) is None
    assert read_identity(store, "fresh").problem == "rmsnorm"


def test_a_deployments_run_is_refused_as_the_command_line_refuses_it(tmp_path):
    """flows/evolve.py asks refusal_to_run first when a deployment started it (no command line checked it)."""
    from ksci.lineage.identity import refusal_to_run

    assert "memory://" in refusal_to_run("memory://x", "r", _identity())
    store = LineageStore(tmp_path)
    store.append(_rows("mix"))
    assert refusal_to_run(str(tmp_path), "mix", _identity()) is None  # recorded: the identity written
    assert "problem rmsnorm (the run has fp8_gemm)" in refusal_to_run(str(tmp_path), "mix", _identity("rmsnorm"))


def test_a_recordings_environment_faults_are_not_the_runs_identity(tmp_path):
    """A generation retried once its GPU is back (tests/test_generation_retry.py removes the recording's fault) is
    the same run; other recorded results are another run."""
    recording = tmp_path / "recording.json"
    point = {"template": "mma", "params": {}, "status": "ok", "shape_times": {"a": 1.0}}

    def identity(entries):
        recording.write_text(json.dumps(entries))
        return identity_of(load_problem("fp8_gemm"), "cuda", None, "tuning", "elitist", str(recording))

    faulted = identity([{"template": "mma", "params": {}, "status": "environment_error"}, point])
    assert faulted == identity([point])
    assert identity([]) == identity([{"template": "mma", "params": {}, "status": "environment_error"}])
    assert identity([point]) != identity([{**point, "shape_times": {"a": 2.0}}])


@pytest.mark.parametrize("deployed", [True, False])
def test_the_evolve_flow_refuses_a_deployments_run_of_another_problem_before_any_generation(
    tmp_path, monkeypatch, deployed
):
    """flows/evolve.py's run_evolution, when a deployment started the flow run (no command line checked it): a run
    recorded for fp8_gemm, continued as rmsnorm, is refused with the command line's line before anything runs. When
    the command line started it, the command line has checked it already (ksci/cli.py), so the flow goes on."""
    from flows import evolve as flow

    store = LineageStore(tmp_path)
    store.append(_rows("mix"))
    assert claim_run(store, "mix", _identity()) is None
    monkeypatch.setattr(flow, "_is_a_deployment_run", lambda: deployed)
    monkeypatch.setattr(flow, "llm_for", lambda spec, llm: (_ for _ in ()).throw(RuntimeError("went on")))
    spec = RunSpec(problem="rmsnorm", run="mix", store_root=str(tmp_path), simulate="")
    with pytest.raises((ValueError, RuntimeError)) as raised:
        flow.run_evolution(spec)
    if deployed:
        assert type(raised.value) is ValueError and "problem rmsnorm (the run has fp8_gemm)" in str(raised.value)
    else:
        assert str(raised.value) == "went on"
