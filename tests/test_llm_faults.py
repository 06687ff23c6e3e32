"""Hostile LLM endpoints (issue 26), each a scripted OpenAI-compatible server on 127.0.0.1 that misbehaves one way,
driven through the real openai SDK: every fault comes back as a typed failure value with its llm_calls row, on time,
and nothing that was sent as a secret is kept. The CLI's side (rc 3 on a refused key; a whole run grepped for the
key) is in tests/test_llm_secrets.py."""

from __future__ import annotations

import math
import socket
import threading
import time
from contextlib import closing

import pytest
from support.scripted_llm_server import ScriptedLlmServer

from ksci.llm.ask import Ledger, StageRequest, ask_stage
from ksci.llm.client import LlmReply, chat
from ksci.llm.config import Budget, load_config
from ksci.llm.ledger import LlmLedger
from ksci.llm.prompts import stage_marker
from ksci.llm.secrets import Scrubber, normalise_text, safe_label, split_credentials
from ksci.llm.selector import SCHEMA

KEY = "sk-test-FAULTS-42"
ANSWER = {"json": {"base_id": "0123456789abcdef", "reference_id": None, "reason": "fastest"}}
MESSAGES = [{"role": "system", "content": stage_marker("selector")}, {"role": "user", "content": "pick"}]
REQUEST = StageRequest("selector", "selector", MESSAGES, SCHEMA, {"ids": ["0123456789abcdef"]})
NO_BUDGET = Budget()
WRITER = [{"role": "system", "content": stage_marker("writer")}, {"role": "user", "content": "write"}]


@pytest.fixture
def endpoint(monkeypatch):
    """start(answers, base_url=None, **config) -> (server, settings): a scripted selector and writer."""
    monkeypatch.setenv("KSCI_TEST_KEY", KEY)
    servers = []

    def start(answers, base_url=None, options=None, **config):
        server = ScriptedLlmServer({"selector": answers, "writer": answers, "options": options or {}}).start()
        servers.append(server)
        config = {"timeout_s": 2.0, **config}
        url = base_url or server.base_url
        llm = load_config(env={}, base_url=url, model="m", api_key_env="KSCI_TEST_KEY", **config)
        return server, llm.stage("selector")

    yield start
    for server in servers:
        server.stop()


def _calls(tmp_path) -> list[str]:
    return list(LlmLedger(tmp_path).calls("run")["outcome"])


def _ask(settings, tmp_path, request=REQUEST, budget=NO_BUDGET):
    return ask_stage(request, settings, Ledger(str(tmp_path), "run", 1), budget=budget)


@pytest.mark.parametrize(
    "answer",
    [
        {"raw": "<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"},
        {"raw": '{"id": "x", "choices": [{"message": {"content": "cut', "content_type": "application/json"},
        {"raw": '{"id": "x", "object": "chat.completion"}'},  # no choices
        {"raw": '{"choices": null, "usage": {}}'},
        {"raw": '{"choices": [{"message": {"content": 42}}]}'},  # content not text
        {**ANSWER, "usage": {"prompt_tokens": -1999914021, "completion_tokens": 5}},
        {**ANSWER, "usage": {"prompt_tokens": 10, "completion_tokens": math.nan}},
        {**ANSWER, "usage": {"prompt_tokens": 1e20, "completion_tokens": 5}},
        {**ANSWER, "usage": {"prompt_tokens": 10, "completion_tokens": 2.5}},
    ],
    ids=["html", "malformed-json", "no-choices", "null-choices", "int-content", "negative", "nan", "huge", "fraction"],
)
def test_a_body_that_is_not_a_chat_completion_is_a_bad_body_with_its_row(endpoint, tmp_path, answer):
    _server, settings = endpoint([answer])
    got = _ask(settings, tmp_path)  # no exception escapes
    assert got.reply is None and got.failure.kind == "bad_body" and not got.failure.transient
    assert got.reason.startswith("call failed: bad_body: ")
    assert _calls(tmp_path) == ["bad_body"]
    assert LlmLedger(tmp_path).spent("run") == (0, 0.0)  # nothing absurd counted


def test_a_trickled_body_stops_at_the_deadline_and_its_thread_ends(endpoint, tmp_path):
    """A byte every 0.5 s with timeout_s=2: the call returns at about 2 s (it hung before: the timeout was per
    read), and the thread that read the body ends soon after (no socket left reading behind the run)."""
    _server, settings = endpoint([{**ANSWER, "trickle": 0.5}])
    started = time.monotonic()
    got = _ask(settings, tmp_path)
    took = time.monotonic() - started
    # Without the deadline the trickle lasts minutes; under 30 s leaves room for a busy machine.
    assert got.failure.kind == "timeout" and got.failure.transient and 1.9 < took < 30.0, took
    assert "within the 2 s deadline" in got.failure.message
    assert _calls(tmp_path) == ["timeout"]
    deadline = time.monotonic() + 5
    while any(t.name == "llm-call" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(t.name == "llm-call" for t in threading.enumerate())


def test_a_429_waits_as_long_as_retry_after_asks(endpoint, tmp_path):
    server, settings = endpoint([{"status": 429, "headers": {"Retry-After": "1.5"}}, ANSWER])
    started = time.monotonic()
    got = _ask(settings, tmp_path)
    assert got.value is not None and time.monotonic() - started >= 1.5
    assert _calls(tmp_path) == ["rate_limit", "ok"] and server.count() == 2


def test_a_retry_after_longer_than_the_cap_is_waited_only_up_to_the_cap(endpoint, tmp_path):
    server, settings = endpoint([{"status": 429, "headers": {"Retry-After": "20"}}, ANSWER], retry_after_cap_s=0.5)
    started = time.monotonic()
    got = _ask(settings, tmp_path)
    assert got.value is not None and 0.5 <= time.monotonic() - started < 15  # not the 20 s asked for
    assert _calls(tmp_path) == ["rate_limit", "ok"]


def test_a_rate_limit_without_retry_after_is_left_to_prefects_backoff(endpoint, tmp_path):
    server, settings = endpoint([{"status": 429}, ANSWER])
    got = _ask(settings, tmp_path)
    assert got.failure.kind == "rate_limit" and got.failure.transient and server.count() == 1


def test_an_unreachable_url_is_named_without_its_credentials(endpoint, tmp_path):
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    _server, settings = endpoint([ANSWER], base_url=f"http://bob:pw-SECRET9@127.0.0.1:{port}/v1")
    assert settings.base_url == f"http://127.0.0.1:{port}/v1" and "pw-SECRET9" not in repr(settings)
    got = _ask(settings, tmp_path)
    assert got.failure.kind == "unreachable" and got.failure.transient
    assert f"cannot reach the LLM endpoint http://127.0.0.1:{port}/v1 (" in got.failure.message
    assert "pw-SECRET9" not in got.failure.message and "Connection error." not in got.failure.message
    assert _calls(tmp_path) == ["unreachable"]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_an_auth_failure_with_its_row(endpoint, tmp_path, status):
    _server, settings = endpoint([{"status": status, "content": f"invalid key {KEY}"}])
    got = _ask(settings, tmp_path)
    assert got.failure.kind == "auth" and not got.failure.transient
    assert KEY not in got.failure.message and "[redacted]" in got.failure.message
    assert _calls(tmp_path) == ["auth"]


def test_lone_surrogates_and_nul_bytes_are_normalised_before_anything_is_stored(endpoint, tmp_path):
    code = '```cuda\nextern "C" int fp8_gemm(void* s) { return 0; } // \ud800 odd\x00\n```'
    _server, settings = endpoint([{"content": code}])
    request = StageRequest("writer", "plan-0/attempt-1", WRITER, None, {"base_source": "", "entry_name": "fp8_gemm"})
    got = _ask(settings, tmp_path, request)
    assert got.value is not None and "\ufffd odd\n" in got.value.code and "\x00" not in got.value.code
    got.value.code.encode("utf-8")  # storable
    assert _calls(tmp_path) == ["ok"]


def test_an_echoed_key_and_model_name_are_redacted_at_the_client(endpoint, tmp_path):
    answer = {**ANSWER, "model": f"evil\n#include </etc/passwd> {KEY}"}
    _server, settings = endpoint([answer], options={"echo_key": True})
    reply = chat(settings, MESSAGES, SCHEMA)
    assert isinstance(reply, LlmReply) and KEY not in reply.text and "[redacted]" in reply.text
    assert KEY not in reply.model and "\n" not in reply.model and " " not in reply.model
    _ask(settings, tmp_path)
    assert not any(KEY.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_the_budget_reserves_each_calls_maximum_so_parallel_calls_cannot_overshoot_it(endpoint, tmp_path):
    """Three calls at once under a budget that one call's maximum fills: one is sent, two are refused (all three
    were sent before, each seeing the budget unspent)."""
    server, settings = endpoint([{**ANSWER, "sleep": 0.5, "repeat": True}], max_tokens=100)
    budget = Budget(tokens=120)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(_ask(settings, tmp_path, budget=budget))) for _ in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.count() == 1 and sorted(a.failure is None for a in answers) == [False, False, True]
    refused = [a for a in answers if a.budget_spent]
    assert len(refused) == 2 and "call(s) in flight" in refused[0].failure.message
    tokens, _usd = LlmLedger(tmp_path).spent("run")
    assert tokens <= 120 + 100 + 20  # never more than one call's maximum over


def test_the_scrubber_redacts_keys_url_credentials_and_their_encodings():
    scrub = Scrubber.of(KEY, "bob:p@ss/w0rd", "p@ss/w0rd", None, "ab")
    text = f"key {KEY}, url http://bob:p@ss/w0rd@h, encoded p%40ss%2Fw0rd, short ab stays"
    assert scrub(text) == "key [redacted], url http://[redacted]@h, encoded [redacted], short ab stays"
    assert split_credentials("http://u:pw@host:8/v1") == ("http://host:8/v1", "u:pw")
    assert split_credentials("http://host/v1") == ("http://host/v1", None)
    assert normalise_text("a\ud800b\x00c") == "a\ufffdbc"
    assert safe_label("gpt-4o\n#include <x>") == "gpt-4o__include__x_"
