"""The registry of proposers (ksci.proposers.registry): every consumer reads it, and a proposer added through it
alone (tests/support/toy_proposer.py, registered here) runs a simulated evolution end to end."""

from __future__ import annotations

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.prefect_harness import on_shared_api  # noqa: E402

from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.proposers import registry  # noqa: E402
from ksci.proposers.registry import ProposerKind, kind_of, register  # noqa: E402
from ksci.run import RunSpec, overlap_allowed  # noqa: E402

TOY = ProposerKind(
    name="toy",
    summary="random search (a test's)",
    factory="support.toy_proposer:make",
    step="support.toy_proposer:random_points",
    needs_templates=True,
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))  # the test's entry goes when it ends
    return register(TOY)


def test_the_built_in_proposers_are_registered_with_what_the_command_line_needs():
    assert registry.names() == ("tuning", "llm")
    assert kind_of("tuning").default_overlap == 1 and kind_of("tuning").needs_templates
    assert kind_of("llm").uses_llm and not overlap_allowed(1, "llm") and overlap_allowed(1, "tuning")
    assert kind_of("tuning").step_function().__name__ == "propose_tuning"


def test_an_unknown_proposer_is_refused_with_the_registered_names():
    with pytest.raises(ValueError, match="'nope': expected one of 'tuning', 'llm'"):
        RunSpec(problem="fp8_gemm", run="r", proposer="nope")
    with pytest.raises(ValueError, match="other than 'auto'"):
        register(ProposerKind(name="auto", summary="", factory="x:y"))


def test_the_command_line_offers_a_registered_proposer(toy):
    from ksci.cli import build_parser

    args = build_parser().parse_args(["evolve", "--problem", "fp8_gemm", "--proposer", "toy", "--simulate"])
    assert args.proposer == "toy"


@pytest.mark.slow
def test_a_toy_proposer_added_through_the_registry_runs_a_simulated_evolution(tmp_path, toy, shared_prefect_api):
    from flows.evolve import evolve

    store = tmp_path / "store"
    with on_shared_api(shared_prefect_api):
        kwargs = dict(problem="fp8_gemm", generations=2, run="toy-run", children=3, simulate="", proposer="toy")
        summaries = evolve(**kwargs, store_root=str(store), profile=False)
        rows = LineageStore(store).read("toy-run")
        assert [s["generation"] for s in summaries] == [0, 1]
        assert rows.groupby("generation").size().to_dict() == {0: 3, 1: 3}
        assert set(rows["proposer"]) == {"toy"} and rows["candidate_id"].is_unique
        assert set(rows["status"]) <= {"ok", "compile_error"} and (rows["status"] == "ok").any()
        again = evolve(**kwargs, store_root=str(store), profile=False)  # its cached step replays: no new row
        assert len(LineageStore(store).read("toy-run")) == 6 and [s["candidates"] for s in again] == [3, 3]
