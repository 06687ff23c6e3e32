"""The evolution flows under prefect_test_harness, with the GPU stages replaced by the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.prefect_harness import on_shared_api  # noqa: E402

from flows.evolve import evolve  # noqa: E402
from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.problem.spec import load_problem  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def harness(shared_prefect_api):
    with on_shared_api(shared_prefect_api):
        yield


RECORDING = Path(__file__).parent / "data" / "fp8_gemm_h200_recording.json"  # from a real H200 run
BROKEN = {"status": "environment_error"}  # the simulator's GPU goes away while this point runs


def _run(tmp_path, run: str, recording=None, generations: int = 2, overlap: int = 0, gpus=None):
    return evolve(
        problem="fp8_gemm",
        target="cuda",
        generations=generations,
        run=run,
        children=3,
        store_root=str(tmp_path / "store"),
        simulate=str(recording) if recording else "",
        overlap=overlap,
        gpus=gpus,
    )


def test_generations_are_recorded_with_their_lineage(tmp_path, caplog):
    summaries = _run(tmp_path, "lineage", RECORDING)
    rows = LineageStore(tmp_path / "store").read("lineage")
    seeds = rows[rows["generation"] == 0]
    children = rows[rows["generation"] == 1]
    cuda_templates = {t.name for t in load_problem("fp8_gemm").templates_for("cuda")}
    assert set(seeds["template"]) == cuda_templates and set(seeds["proposer"]) == {"seed"}
    assert len(children) == 3 and set(children["proposer"]) == {"tuning"}
    assert children["parent_id"].isin(seeds["candidate_id"]).all()
    assert (children["hypothesis"].str.len() > 0).all()
    assert rows["candidate_id"].is_unique and set(rows["status"]) <= {"ok", "compile_error"}
    assert rows[rows["status"] == "ok"]["geomean_us"].notna().all()
    assert (rows[rows["status"] == "ok"]["gpu"] == "SIMULATOR").all()
    # The seeds were recorded on the H200: the simulator replays their timings exactly.
    recorded = {(r["template"], json.dumps(r["params"], sort_keys=True)): r for r in json.loads(RECORDING.read_text())}
    for _, seed in seeds.iterrows():
        if (seed["template"], seed["params_json"]) not in recorded:
            continue  # a family newer than the recording (its time is made up)
        replayed = recorded[(seed["template"], seed["params_json"])]
        assert seed["shape_times_json"] and json.loads(seed["shape_times_json"]) == pytest.approx(
            replayed["shape_times"]
        )
    for source_path in rows["source_path"]:
        assert "fp8_gemm" in LineageStore(tmp_path / "store").read_source(source_path)
    assert [s["generation"] for s in summaries] == [0, 1]
    # The recording's compile errors are points that a template's declared constraints rule out: none is proposed.
    problem = load_problem("fp8_gemm")
    points = rows[rows["kind"] == "point"]
    assert all(
        problem.template("cuda", t).feasible(json.loads(p))
        for t, p in zip(points["template"], points["params_json"], strict=True)
    )
    assert (rows["status"] == "ok").all()


def test_a_failure_lands_in_the_flow_runs_logs(tmp_path, caplog):
    naive = load_problem("fp8_gemm").template("cuda", "naive")
    recording = tmp_path / "recording.json"
    recording.write_text(json.dumps([{"template": "naive", "params": naive.default, "status": "compile_error"}]))
    _run(tmp_path, "logged", recording, generations=1)
    rows = LineageStore(tmp_path / "store").read("logged")
    (failed,) = rows[rows["status"] != "ok"]["candidate_id"]
    assert f"candidate {failed}: compile_error" in caplog.text


def test_a_composed_candidate_of_the_per_shape_winners_is_recorded_as_such(tmp_path):
    """4 generations of 4 children on the H200 recording: a composed candidate, no point twice, none infeasible."""
    evolve(
        problem="fp8_gemm", target="cuda", generations=4, run="composed", children=4,
        store_root=str(tmp_path / "store"), simulate=str(RECORDING),
    )  # fmt: skip
    rows = LineageStore(tmp_path / "store").read("composed")
    problem = load_problem("fp8_gemm")
    points = rows[rows["kind"] == "point"]
    assert len(set(zip(points["template"], points["params_json"], strict=True))) == len(points)
    assert all(
        problem.template("cuda", t).feasible(json.loads(p))
        for t, p in zip(points["template"], points["params_json"], strict=True)
    )
    composed = rows[rows["kind"] == "composed"]
    assert len(composed) >= 1 and composed["template"].isna().all() and composed["params_json"].isna().all()
    assert (composed["status"] == "ok").all() and composed["params_by_shape_json"].is_unique
    for _, row in composed.iterrows():
        plan = json.loads(row["params_by_shape_json"])
        assert set(plan["shapes"]) == set(json.loads(row["shape_times_json"]))
        assert row["parent_id"] in set(points["candidate_id"]) and row["hypothesis"].startswith("composed of")
        source = LineageStore(tmp_path / "store").read_source(row["source_path"])
        assert source.startswith("// ksci: composed ")


def test_rerun_is_all_cache_hits_and_adds_no_rows(tmp_path):
    _run(tmp_path, "again")
    before = LineageStore(tmp_path / "store").read("again")
    summaries = _run(tmp_path, "again")
    after = LineageStore(tmp_path / "store").read("again")
    assert len(after) == len(before)
    for s in summaries:
        assert s["compiled"] == 0 and s["benchmarked"] == 0
        assert s["compile_cache_hits"] == s["candidates"] == s["benchmark_cache_hits"]


def test_a_generation_that_fails_midway_reruns_from_the_cache(tmp_path, caplog):
    problem = load_problem("fp8_gemm")
    mma = problem.template("cuda", "mma")
    recording = tmp_path / "recording.json"
    # The GPU "goes away" while the mma seed runs; the other two candidates finish and are recorded.
    recording.write_text(json.dumps([{"template": "mma", "params": mma.default, "status": "environment_error"}]))
    with pytest.raises(Exception, match="GPU went away"):
        _run(tmp_path, "flaky", recording, generations=1)
    rows = LineageStore(tmp_path / "store").read("flaky")
    default = json.dumps(mma.default, sort_keys=True)
    assert len(rows) == 2 and default not in set(rows["params_json"])  # the two others were recorded
    assert "Rerun the evolution: `ksci evolve --run flaky`" in caplog.text  # its generations were subflows

    recording.write_text("[]")  # the GPU is back
    (summary,) = _run(tmp_path, "flaky", recording, generations=1)
    rows = LineageStore(tmp_path / "store").read("flaky")
    assert len(rows) == 3 and default in set(rows["params_json"]) and rows["candidate_id"].is_unique
    assert summary["compile_cache_hits"] == 3 and summary["compiled"] == 0  # every compile had finished
    assert summary["benchmark_cache_hits"] == 2 and summary["benchmarked"] == 1  # only the failed one runs again


def test_overlapping_generations_learn_from_their_horizon_and_repeat_nothing(tmp_path):
    summaries = _run(tmp_path, "overlap", RECORDING, generations=5, overlap=1, gpus=["0", "1"])
    rows = LineageStore(tmp_path / "store").read("overlap")
    assert [s["generation"] for s in summaries] == [0, 1, 2, 3, 4]
    assert rows["candidate_id"].is_unique and len(rows) == sum(s["candidates"] for s in summaries)
    points = rows[rows["kind"] == "point"]
    assert not points[["template", "params_json"]].duplicated().any()  # nothing proposed while it was in flight
    assert rows["params_by_shape_json"].dropna().is_unique  # nor a composition
    generation_of = dict(zip(rows["candidate_id"], rows["generation"], strict=True))
    # Generation 1 overlaps generation 0 and learns from nothing: it seeds the run, as generation 0 does.
    assert set(rows[rows["generation"] <= 1]["proposer"]) == {"seed"}
    assert rows[rows["generation"] <= 1]["parent_id"].isna().all()
    for _, child in rows[rows["generation"] >= 2].iterrows():
        # Generation g learns only from the generations before g - 1: its parents come from there.
        assert generation_of[child["parent_id"]] < child["generation"] - 1
    devices = {json.loads(r)["gpu_window"]["device"] for r in rows[rows["status"] == "ok"]["fingerprint_json"]}
    assert devices == {"0", "1"}

    again = _run(tmp_path, "overlap", RECORDING, generations=5, overlap=1, gpus=["0", "1"])
    assert len(LineageStore(tmp_path / "store").read("overlap")) == len(rows)
    assert all(s["compiled"] == 0 and s["benchmarked"] == 0 for s in again)  # proposals, keys: all the same


def test_an_overlapping_generation_that_fails_lets_the_next_finish_and_reruns(tmp_path):
    recording = tmp_path / "recording.json"
    recording.write_text("[]")
    _run(tmp_path, "probe", recording, generations=2, overlap=1)
    probe = LineageStore(tmp_path / "store").read("probe")
    doomed = probe[probe["generation"] == 1].iloc[0]  # generation 1's proposals do not depend on the run's name

    flaky = tmp_path / "flaky.json"
    flaky.write_text(
        json.dumps([{"template": doomed["template"], "params": json.loads(doomed["params_json"])} | BROKEN])
    )
    with pytest.raises(Exception, match="GPU went away"):
        _run(tmp_path, "flaky", flaky, generations=4, overlap=1)
    rows = LineageStore(tmp_path / "store").read("flaky")
    # Generation 2 (learns from 0) ran beside the failing generation 1 and finished; generation 3 (learns from 0
    # and 1) never began.
    assert sorted(rows["generation"].value_counts().items()) == [(0, 3), (1, 2), (2, 3)]

    flaky.write_text("[]")  # the GPU is back
    summaries = _run(tmp_path, "flaky", flaky, generations=4, overlap=1)
    rows = LineageStore(tmp_path / "store").read("flaky")
    assert sorted(rows["generation"].value_counts().items()) == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert rows["candidate_id"].is_unique
    assert summaries[1]["benchmarked"] == 1 and summaries[2]["benchmarked"] == 0  # only the failed one again


def test_a_candidate_cap_gives_the_last_generation_only_what_is_left_and_a_rerun_keeps_it(tmp_path, caplog):
    """--max-candidates 5 with 3 children a generation: generation 0 has 3, generation 1 gets the 2 left, and the
    run stops before generation 2 saying why; a rerun with the same cap replays it all from the cache."""
    summaries = evolve(
        problem="fp8_gemm", target="cuda", generations=4, run="capped", children=3,
        store_root=str(tmp_path / "store"), simulate=str(RECORDING), max_candidates=5,
    )  # fmt: skip
    rows = LineageStore(tmp_path / "store").read("capped")
    assert sorted(rows["generation"].value_counts().items()) == [(0, 3), (1, 2)]
    assert [s["generation"] for s in summaries] == [0, 1]
    assert "stops before generation 2: the run holds 5 candidates (limit 5)" in caplog.text
    again = evolve(
        problem="fp8_gemm", target="cuda", generations=4, run="capped", children=3,
        store_root=str(tmp_path / "store"), simulate=str(RECORDING), max_candidates=5,
    )  # fmt: skip
    assert len(LineageStore(tmp_path / "store").read("capped")) == 5
    assert all(s["compiled"] == 0 and s["benchmarked"] == 0 for s in again)


def test_a_cap_on_overlapping_generations_counts_the_ones_in_flight(tmp_path):
    """Generation 1 starts beside generation 0 (overlap 1), so its 3 count before any is recorded: with a cap of 7,
    generation 2 gets 1 and generation 3 never starts."""
    evolve(
        problem="fp8_gemm", target="cuda", generations=5, run="capped-overlap", children=3,
        store_root=str(tmp_path / "store"), simulate=str(RECORDING), overlap=1, gpus=["0", "1"], max_candidates=7,
    )  # fmt: skip
    rows = LineageStore(tmp_path / "store").read("capped-overlap")
    assert sorted(rows["generation"].value_counts().items()) == [(0, 3), (1, 3), (2, 1)]


def test_a_time_limit_of_zero_runs_generation_0_only(tmp_path, caplog):
    summaries = evolve(
        problem="fp8_gemm", target="cuda", generations=3, run="timed", children=3,
        store_root=str(tmp_path / "store"), simulate=str(RECORDING), time_limit_s=0.0,
    )  # fmt: skip
    assert [s["generation"] for s in summaries] == [0]
    assert set(LineageStore(tmp_path / "store").read("timed")["generation"]) == {0}
    assert "stops before generation 1: " in caplog.text and "min have passed (time limit 0.0 min)" in caplog.text


def test_rebench_retimes_the_champions_into_a_run_of_its_own(tmp_path):
    from flows.rebench import rebench

    _run(tmp_path, "champions", RECORDING, generations=1)
    rows = rebench(run="champions", top=2, store_root=str(tmp_path / "store"), simulate=str(RECORDING))
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    retimed = LineageStore(tmp_path / "store").read("champions-rebench")
    assert len(retimed) == 2 and set(retimed["proposer"]) == {"rebench"}
    original = LineageStore(tmp_path / "store").read("champions")
    best_two = original[original["status"] == "ok"].nsmallest(2, "geomean_us")
    assert set(retimed["parent_id"]) == set(best_two["candidate_id"])
    # The simulator replays the same recording, so the re-timing equals the original here.
    assert sorted(retimed["geomean_us"]) == pytest.approx(sorted(best_two["geomean_us"]))


def test_a_simulated_tuning_evolution_improves_its_best_at_least_twice_after_the_seeds(tmp_path):
    """`make evolve GENERATIONS=5 SIMULATE=1` as the flow runs it (6 children, one overlapping generation, made-up
    timings from the simulator's cost model): the best so far improves in at least two generations after 0."""
    summaries = evolve(
        problem="fp8_gemm", target="cuda", generations=5, run="learns", children=6,
        store_root=str(tmp_path / "store"), simulate="", overlap=1,
    )  # fmt: skip
    bests, best = [], float("inf")
    for summary in sorted(summaries, key=lambda s: s["generation"]):
        ok = [r["geomean_us"] for r in summary["rows"] if r["status"] == "ok" and r.get("geomean_us")]
        best = min([best, *ok])
        bests.append(best)
    improved = [g for g in range(1, len(bests)) if bests[g] < bests[g - 1]]
    assert len(bests) == 5 and len(improved) >= 2, bests
