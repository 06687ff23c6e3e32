"""The real openai SDK against the SCRIPTED OpenAI-compatible server (real HTTP, nothing mocked)."""

from __future__ import annotations

import pytest
from support.scripted_llm_server import ScriptedLlmServer

from ksci.errors import Failure
from ksci.llm.ask import Ledger, StageRequest, ask_stage
from ksci.llm.client import LlmReply, chat
from ksci.llm.config import Budget, Price, load_config
from ksci.llm.ledger import LlmLedger
from ksci.llm.prompts import stage_marker
from ksci.llm.selector import SCHEMA

KEY = "sk-test-SECRET123"
SELECTION = {"json": {"base_id": "0123456789abcdef", "reference_id": None, "reason": "fastest"}}
MESSAGES = [{"role": "system", "content": stage_marker("selector")}, {"role": "user", "content": "pick"}]


@pytest.fixture
def endpoint(monkeypatch):
    """Start a scripted server; returns (server, settings of the selector stage)."""
    monkeypatch.setenv("KSCI_TEST_KEY", KEY)
    servers = []

    def start(answers, **options):
        server = ScriptedLlmServer({"selector": answers, "options": options}).start()
        servers.append(server)
        config = load_config(env={}, base_url=server.base_url, model="m", api_key_env="KSCI_TEST_KEY", timeout_s=5.0)
        return server, config.stage("selector")

    yield start
    for server in servers:
        server.stop()


def test_a_structured_answer_comes_back_with_usage_and_cost(endpoint):
    server, settings = endpoint([SELECTION])
    reply = chat(settings, MESSAGES, SCHEMA, Price(prompt=2.0, completion=8.0))
    assert isinstance(reply, LlmReply) and reply.structured and reply.finish_reason == "stop"
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 2 + reply.completion_tokens * 8) / 1e6)
    assert server.requests == [{"stage": "selector", "answer": 0, "status": 200}]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ({"status": 429}, "rate_limit"),
        ({"status": 500}, "http_500"),
        ({"status": 503}, "http_503"),
        ({"sleep": 6.5}, "timeout"),  # past the 5 s deadline (1 s was missed by an honest answer on a busy CI)
    ],
)
def test_transient_failures_are_values_that_say_so_for_prefect_to_retry(endpoint, answer, kind):
    _server, settings = endpoint([{**answer, "content": "late"}, SELECTION])
    failure = chat(settings, MESSAGES, SCHEMA)
    assert isinstance(failure, Failure) and failure.kind == kind and failure.transient
    assert isinstance(chat(settings, MESSAGES, SCHEMA), LlmReply)  # then success, as a retry would get


def test_an_endpoint_without_structured_output_is_asked_again_in_plain_text(endpoint):
    server, settings = endpoint([SELECTION], refuse_response_format=True)
    reply = chat(settings, MESSAGES, SCHEMA)
    assert isinstance(reply, LlmReply) and not reply.structured
    assert [r["status"] for r in server.requests] == [400, 200]


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (403, "auth"), (404, "http_404")])
def test_a_client_error_is_a_value_not_a_retry(endpoint, status, kind):
    _server, settings = endpoint([{"status": status, "content": "bad key"}])
    failure = chat(settings, MESSAGES, SCHEMA)
    assert isinstance(failure, Failure) and failure.kind == kind and not failure.transient


def test_ask_records_every_request_and_parses_malformed_truncated_and_good_answers(endpoint, tmp_path):
    answers = [
        {"content": "I think the first one is best."},  # prose, no JSON
        {"content": '{"base_id": "0123', "finish_reason": "length"},  # truncated
        {"status": 429},
        SELECTION,
    ]
    server, settings = endpoint(answers)
    ledger = Ledger(str(tmp_path), "run1", 3)
    request = StageRequest("selector", "selector", MESSAGES, SCHEMA, {"ids": ["0123456789abcdef"]})
    prose = ask_stage(request, settings, ledger, Price(1.0, 1.0))
    assert prose.value is None and prose.failure == Failure("unusable", "no JSON object in the answer")
    assert prose.reason == "no JSON object in the answer" and prose.reply is not None  # answered: repairable
    truncated = ask_stage(request, settings, ledger)
    assert truncated.value is None and truncated.failure.kind == "truncated"
    assert truncated.failure.message.startswith("truncated answer (finish_reason=length")
    limited = ask_stage(request, settings, ledger)
    assert limited.reply is None and limited.failure.kind == "rate_limit" and limited.failure.transient
    assert limited.reason.startswith("call failed: rate_limit: ")
    good = ask_stage(request, settings, ledger)
    assert good.value.base_id == "0123456789abcdef" and good.failure is None and good.reason == ""
    calls = LlmLedger(tmp_path).calls("run1")
    assert list(calls["outcome"]) == ["unusable", "truncated", "rate_limit", "ok"]
    assert set(calls["generation"]) == {3} and calls["prompt_sha256"].nunique() == 1
    assert calls["cost_usd"].iloc[0] > 0 and server.count() == 4
    assert not any(KEY.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_a_spent_budget_stops_calls_before_they_are_sent(endpoint, tmp_path):
    server, settings = endpoint([{**SELECTION, "repeat": True}])
    ledger = Ledger(str(tmp_path), "run1", 0)
    request = StageRequest("selector", "selector", MESSAGES, SCHEMA, {"ids": []})
    ask_stage(request, settings, ledger, budget=Budget(tokens=10))
    spent = ask_stage(request, settings, ledger, budget=Budget(tokens=10))
    assert spent.budget_spent and spent.reply is None and not spent.failure.transient
    assert spent.reason.startswith("budget: token budget spent")
    assert server.count() == 1 and len(LlmLedger(tmp_path).calls("run1")) == 1


def test_a_refused_call_is_recorded_and_comes_back_as_a_failure_not_to_retry(endpoint, tmp_path):
    _server, settings = endpoint([{"status": 404, "content": "no such model"}])
    request = StageRequest("selector", "selector", MESSAGES, SCHEMA, {"ids": []})
    refused = ask_stage(request, settings, Ledger(str(tmp_path), "run1", 0))
    assert refused.reply is None and refused.failure.kind == "http_404" and not refused.failure.transient
    assert list(LlmLedger(tmp_path).calls("run1")["outcome"]) == ["http_404"]


def test_the_selector_is_a_selection_strategy_that_falls_back_to_a_rule(endpoint, tmp_path):
    import random

    import pandas as pd

    from ksci.lineage.store import Candidate, empty_frame
    from ksci.llm.selector import llm_strategy
    from ksci.problem.spec import load_problem

    rows = [
        Candidate(
            run="r",
            problem="fp8_gemm",
            generation=0,
            candidate_id=cid,
            proposer="seed",
            template=t,
            source_path="s",
            target="cuda",
            status="ok",
            geomean_us=g,
        )
        for cid, t, g in (("aaaaaaaaaaaaaaaa", "mma", 100.0), ("bbbbbbbbbbbbbbbb", "naive", 900.0))
    ]
    population = pd.concat([empty_frame(), pd.DataFrame([r.__dict__ for r in rows])], ignore_index=True)
    picked = {"json": {"base_id": "bbbbbbbbbbbbbbbb", "reference_id": "aaaaaaaaaaaaaaaa", "reason": "contrast"}}
    _server, settings = endpoint([picked, {"content": "the fast one, obviously"}])
    ledger = Ledger(str(tmp_path), "r", 1)
    strategy = llm_strategy(lambda request: ask_stage(request, settings, ledger), load_problem("fp8_gemm"), "cuda")
    (chosen,) = strategy(population, 1, random.Random(0))
    assert (chosen.base_id, chosen.reference_id, chosen.reason) == (
        "bbbbbbbbbbbbbbbb",
        "aaaaaaaaaaaaaaaa",
        "LLM selector: contrast",
    )
    (fallback,) = strategy(population, 1, random.Random(0))
    assert fallback.base_id == "aaaaaaaaaaaaaaaa"  # elitist: the fastest
    assert fallback.reason.startswith("LLM selector unusable (no JSON object in the answer); elitist: rank 1 of 2")
