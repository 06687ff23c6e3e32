"""An imported problem has no seed template: generation 0 of an LLM evolution is written from the reference, and
generation 1 goes through selector, designer and writer as for shipped problems. Evolve flows under
prefect_test_harness, the simulator for the GPU, the SCRIPTED server (tests/support/imported_script.py)."""

from __future__ import annotations

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.fp8_gemm_script import demo_config_toml  # noqa: E402
from support.imported_problems import import_all  # noqa: E402
from support.imported_script import first_kernels, imported_script, written_id  # noqa: E402
from support.prefect_harness import on_shared_api  # noqa: E402
from support.scripted_llm_server import ScriptedLlmServer  # noqa: E402

from flows.evolve import evolve  # noqa: E402
from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.llm.config import load_config  # noqa: E402
from ksci.llm.writer import FIRST_PLANS  # noqa: E402
from ksci.report.html import build_report  # noqa: E402

pytestmark = pytest.mark.slow
PROBLEM = "level2_gemm_multiply_leakyrelu"


@pytest.fixture(scope="module", autouse=True)
def harness(shared_prefect_api):
    with on_shared_api(shared_prefect_api):
        yield


def test_generation_zero_is_written_from_the_reference_then_the_llm_evolves_it(tmp_path, monkeypatch):
    monkeypatch.setenv("KSCI_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path / "kernels"))
    import_all(tmp_path / "kernels")
    with ScriptedLlmServer(imported_script([PROBLEM])) as server:
        config_path = tmp_path / "ksci.toml"
        config_path.write_text(demo_config_toml(server.base_url, timeout_s=5.0, retry_delay_s=0.1))
        config = load_config(config_path, env={})
        store = tmp_path / "store"
        evolve(problem=PROBLEM, target="cuda", generations=2, run="imp", children=2, store_root=str(store),
               simulate="", proposer="llm", llm=config)  # fmt: skip
        stages = {stage: server.count(stage) for stage in ("selector", "designer", "writer", "findings")}
    rows = LineageStore(store).read("imp")
    gen0, gen1 = rows[rows["generation"] == 0], rows[rows["generation"] == 1]
    assert len(gen0) == 2 and (gen0["proposer"] == "llm").all() and gen0["parent_id"].isna().all()
    assert (gen0["status"] == "ok").all() and gen0["template"].isna().all()
    assert sorted(gen0["hypothesis"].str.split(" \\[").str[0]) == sorted(p.title for p in FIRST_PLANS)
    first = written_id(first_kernels(PROBLEM)[0], FIRST_PLANS[0], None, None)
    assert first in set(gen0["candidate_id"])
    assert len(gen1) == 2 and (gen1["status"] == "ok").all() and (gen1["parent_id"] == first).all()
    assert stages == {"selector": 1, "designer": 1, "writer": 4, "findings": 2}  # gen 0 asks the writer only
    source = LineageStore(store).read_source(gen0[gen0["candidate_id"] == first]["source_path"].iloc[0])
    assert "from parent the reference" in source.splitlines()[0]
    assert "<html" in build_report(rows, LineageStore(store).read_source).lower()
