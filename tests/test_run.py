"""ksci.run.RunSpec: one object for an evolution's settings, checked in one place, that travels as a Prefect flow
parameter (a deployment's JSON too); the progress line and the candidate count the run loop uses."""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict, fields

import pytest

from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.store import Candidate, LineageStore
from ksci.run import LIMIT_PARAMETERS, RunLimits, RunSpec, candidates_before, progress_line


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
        ({"proposer": "magic"}, "proposer 'magic': expected 'tuning' or 'llm'"),
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
