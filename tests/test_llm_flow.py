"""The LLM proposer end to end: evolve flows under prefect_test_harness, the simulator for the GPU, and the SCRIPTED
OpenAI-compatible server (tests/support/fp8_gemm_script.py) for the model, driven through the real openai SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksci.embedded import configure_prefect

configure_prefect()

from support.fp8_gemm_script import demo_config_toml, demo_script  # noqa: E402
from support.prefect_harness import on_shared_api  # noqa: E402
from support.scripted_llm_server import ScriptedLlmServer  # noqa: E402

from flows.evolve import evolve  # noqa: E402
from ksci.lineage.store import LineageStore  # noqa: E402
from ksci.llm.config import LlmConfigError, load_config  # noqa: E402
from ksci.llm.ledger import LlmLedger  # noqa: E402

pytestmark = pytest.mark.slow
KEY = "sk-test-SECRET123"
TIMEOUT_S = 2.0


@pytest.fixture(scope="module", autouse=True)
def harness(shared_prefect_api):
    with on_shared_api(shared_prefect_api):
        yield


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv("KSCI_LLM_API_KEY", KEY)


def _config(tmp_path: Path, base_url: str, **overrides):
    path = tmp_path / "ksci.toml"
    path.write_text(demo_config_toml(base_url, timeout_s=TIMEOUT_S, retry_delay_s=0.1))
    return load_config(path, env={}, **overrides)


def _evolve(tmp_path, run, config, generations=3):
    return evolve(
        problem="fp8_gemm",
        target="cuda",
        generations=generations,
        run=run,
        children=3,
        store_root=str(tmp_path / "store"),
        simulate="",
        proposer="llm",
        llm=config,
    )


def test_two_llm_generations_end_to_end_and_a_rerun_pays_only_for_unusable_answers(tmp_path, caplog):
    with ScriptedLlmServer(demo_script(timeout_s=TIMEOUT_S)) as server:
        config = _config(tmp_path, server.base_url)
        summaries = _evolve(tmp_path, "llm", config)
        sent = server.count()
        rows = LineageStore(tmp_path / "store").read("llm")
        ledger = LlmLedger(tmp_path / "store")
        calls = ledger.calls("llm")

        assert [s["generation"] for s in summaries] == [0, 1, 2]
        llm = rows[rows["proposer"] == "llm"]
        for generation in (1, 2):
            mine = llm[llm["generation"] == generation]
            ok = mine[mine["status"] == "ok"]
            assert len(ok) == 3 and ok["geomean_us"].notna().all()  # three experiments timed (simulated)
            assert mine["hypothesis"].str.contains("expected uplift").all()
            assert mine["llm_model"].eq("scripted-demo").all() and mine["completion_tokens"].gt(0).all()
            assert mine["cost_usd"].gt(0).all() and mine["template"].isna().all()
        # Generation 1 starts from the mma seed, as the scripted selector chose; generation 2 from the child it chose
        # (mma_tuned.cu as generation 1 wrote it, under the id of its rendered source).
        seeds = rows[rows["generation"] == 0]
        mma_seed = seeds[seeds["template"] == "mma"]["candidate_id"].iloc[0]
        assert set(llm[llm["generation"] == 1]["parent_id"]) == {mma_seed}
        tuned = llm[(llm["generation"] == 1) & llm["hypothesis"].str.startswith("64-row block tiles")]
        assert set(llm[llm["generation"] == 2]["parent_id"]) == set(tuned["candidate_id"]) and len(tuned) == 1
        # The broken kernel cost only itself: recorded as a compile error, then repaired with its log.
        broken = llm[llm["status"] == "compile_error"]
        assert len(broken) == 1 and llm["hypothesis"].str.startswith("(repair 1 after compile_error)").sum() == 1
        assert llm["hypothesis"].str.startswith("(repair 1 after unusable answer)").sum() == 1
        # Every request is in llm_calls, misbehaviour included; generation 2's findings answer was truncated.
        outcomes = calls.groupby("stage")["outcome"].apply(sorted).to_dict()
        assert outcomes["writer"].count("ok") == 7 and {"rate_limit", "timeout", "unusable"} <= set(outcomes["writer"])
        assert outcomes["designer"] == ["ok", "ok", "unusable"] and outcomes["findings"] == ["ok", "truncated"]
        assert outcomes["selector"] == ["ok", "ok"]
        assert len(calls) == sent == 17
        assert list(ledger.findings("llm")["generation"]) == [1]

        port = server.httpd.server_address[1]

    # The rerun (the same endpoint, asked afresh) takes every usable answer from Prefect's cache. An unusable or
    # truncated answer is never cached (a bad answer must not be replayed into every rerun), so only those prompts
    # are asked again; nothing answered usably is paid twice, and no lineage row is written twice.
    # Asked again, the scripted model answers those prompts as before (the answers the cache holds are left out: a
    # prompt asked again that got a usable answer where it had an unusable one would take the rerun another way,
    # e.g. a selector's other Base, and every later prompt would be new).
    unusable = set(calls[calls["outcome"].isin(["unusable", "truncated"])]["prompt_sha256"])
    script = demo_script(timeout_s=TIMEOUT_S)
    for stage in ("designer", "findings"):
        script[stage] = script[stage][1:]
    with ScriptedLlmServer(script, port=port) as again:
        _evolve(tmp_path, "llm", config)
        resent = again.count()
    after = LlmLedger(tmp_path / "store").calls("llm")
    new = after[after["created_at"] > calls["created_at"].max()]
    shown = new[["generation", "stage", "slot", "outcome"]].to_string()
    # design, prose writer, findings
    assert resent == len(new) == 3 and set(new["prompt_sha256"]) == unusable, shown
    assert sorted(new["outcome"]) == ["truncated", "unusable", "unusable"]
    assert len(LineageStore(tmp_path / "store").read("llm")) == len(rows)

    files = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert files and not any(KEY.encode() in p.read_bytes() for p in files)
    assert KEY not in caplog.text
    prefect_home = Path(os.environ["PREFECT_HOME"])
    assert not any(
        KEY.encode() in p.read_bytes() for p in prefect_home.rglob("*") if p.is_file() and p.stat().st_size < 50_000_000
    )


def test_a_spent_budget_ends_the_run_cleanly(tmp_path, caplog):
    with ScriptedLlmServer(demo_script(timeout_s=TIMEOUT_S)) as server:
        config = _config(tmp_path, server.base_url, budget_tokens=100)
        summaries = _evolve(tmp_path, "budget", config)
        assert server.count() == 1  # the selector's call; then the budget is spent
    assert [s["generation"] for s in summaries] == [0, 1]
    assert summaries[1]["candidates"] == 0 and "budget spent" in summaries[1]["note"]
    assert "stops before generation 2: token budget spent" in caplog.text


def test_a_designer_that_stays_down_fails_the_generation_for_a_rerun(tmp_path):
    script = demo_script(timeout_s=TIMEOUT_S)
    script["designer"] = [{"status": 503, "repeat": True}]
    with ScriptedLlmServer(script) as server:
        config = _config(tmp_path, server.base_url, retries=1)
        with pytest.raises(RuntimeError, match="did not answer after the retries"):
            _evolve(tmp_path, "down", config, generations=2)
        assert server.count("designer") == 2  # the call and one retry
    rows = LineageStore(tmp_path / "store").read("down")
    assert set(rows["generation"]) == {0}  # the seeds stay; generation 1 can be rerun


def test_a_deployment_configures_the_llm_from_the_worker(tmp_path, monkeypatch):
    """A deployment passes no LlmConfig object: the flow reads the config file named by llm_config (or the env)."""
    with ScriptedLlmServer(demo_script(timeout_s=TIMEOUT_S)) as server:
        path = tmp_path / "ksci.toml"
        path.write_text(demo_config_toml(server.base_url, timeout_s=TIMEOUT_S, retry_delay_s=0.1))
        summaries = evolve(
            problem="fp8_gemm",
            generations=2,
            run="deployed",
            children=3,
            store_root=str(tmp_path / "store"),
            simulate="",
            proposer="llm",
            llm_config=str(path),
        )
        assert server.count("designer") >= 1
    assert summaries[1]["candidates"] >= 1
    assert (LineageStore(tmp_path / "store").read("deployed")["proposer"] == "llm").any()
    for name in ("KSCI_LLM_BASE_URL", "OPENAI_BASE_URL", "KSCI_LLM_API_KEY", "OPENAI_API_KEY", "KSCI_LLM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path / "store")  # no ./ksci.toml here
    with pytest.raises(LlmConfigError, match="needs an endpoint on this worker"):
        evolve(problem="fp8_gemm", generations=1, run="none", store_root=str(tmp_path / "s2"), proposer="llm")


def test_evolve_with_the_llm_proposer_and_no_endpoint_is_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KSCI_LLM", "OPENAI_"))}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "ksci.cli", "evolve", "--problem", "fp8_gemm", "--proposer", "llm", "--simulate"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(root)},
        timeout=300,
    )
    assert done.returncode == 2 and "--proposer llm needs an endpoint" in done.stderr


def test_an_unusable_answer_is_not_cached_and_a_usable_one_is(tmp_path):
    """The same writer prompt in three generations' worth of asks: the unusable answer is recorded and handed back
    but not cached, so the next ask is sent; the usable answer that follows is cached, so the third is not."""
    from prefect import flow

    from ksci.llm.request import Ledger, StageRequest
    from tasks.llm import ask

    context = {"base_source": "", "entry_name": "fp8_gemm"}
    messages = [{"role": "system", "content": "[ksci stage: writer]"}, {"role": "user", "content": "unique 4711"}]
    request = StageRequest("writer", "plan-0/attempt-1", messages, None, context)
    code = '```cuda\nextern "C" int fp8_gemm(void* s) { return 0; }\n```'
    script = {"writer": [{"content": "prose, no code"}, {"content": code}, {"content": code}]}

    @flow
    def three_asks(config) -> list:
        ledger = Ledger(str(tmp_path / "store"), "cache", 1)
        return [ask(config, request, ledger).result() for _ in range(3)]

    with ScriptedLlmServer(script) as server:
        first, second, third = three_asks(_config(tmp_path, server.base_url))
        assert server.count() == 2
    assert first.value is None and first.failure.kind == "unusable" and first.reply.text == "prose, no code"
    assert second.value is not None and third.value == second.value
    assert list(LlmLedger(tmp_path / "store").calls("cache")["outcome"]) == ["unusable", "ok"]
