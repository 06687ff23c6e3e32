"""One function that sends chat messages to an OpenAI-compatible endpoint with the openai SDK, and the one place
where LLM text enters the system.

Every outcome is a value: an LlmReply, or an EndpointFailure (ksci.llm.faults) whose kind says what went wrong
(auth, rate_limit, bad_body, timeout, unreachable, http_<status>) and `transient` whether asking again may help.
Nothing the SDK raises escapes, not even what it raises on a body it cannot read (AttributeError, JSONDecodeError,
...): `_send` is the one call site and catches everything there.
- The SDK's own retries are off (max_retries=0): Prefect owns retries (tasks/llm.py), of transient failures only;
  a 429's Retry-After is honoured by ksci.llm.ask.
- `timeout_s` is the whole call's wall-clock deadline (ksci.llm.deadline), not a per-read timeout.
- The reply is checked: choices, a text message, plausible usage numbers (negative, NaN, inf or huge counts make
  it a bad body, so that no budget is fooled and no Parquet write fails).
- Every text of the reply or of a failure is scrubbed of the configured key and URL credentials and normalised
  (ksci.llm.secrets) before it is returned, so that nothing downstream can store a secret.
Structured stages ask for `response_format={"type": "json_schema", ...}`; an endpoint that refuses it (a 400 that
names response_format or json_schema, as older vLLM, Ollama or proxies answer) is asked again in plain text and
the tolerant parser (ksci.llm.parse) reads the answer.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime

import openai

from ksci.errors import Failure
from ksci.llm.config import NO_KEY, Price, StageSettings, api_key
from ksci.llm.deadline import deadline_client, within_deadline
from ksci.llm.faults import EndpointFailure, Fault, fault
from ksci.llm.secrets import Scrubber, credential_parts, join_credentials, normalise_text, safe_label

MAX_USAGE_TOKENS = 10_000_000  # more prompt or completion tokens than any model takes in one call: a bad body
DEFAULT_URL = "https://api.openai.com/v1"  # the SDK's, when no base URL is configured
KEY_VARIABLES = ("KSCI_LLM_API_KEY", "OPENAI_API_KEY")
MAX_CHARS_PER_TOKEN = 16  # an answer longer than max_tokens times this is no answer to max_tokens: a bad body
MAX_FAILURE_CHARS = 1000  # an error body can be anything; its message is logged and recorded


@dataclass(frozen=True)
class LlmReply:
    text: str
    finish_reason: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float
    structured: bool  # whether the endpoint honoured response_format

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def chat(
    settings: StageSettings, messages: list[dict], schema: dict | None = None, price: Price | None = None
) -> LlmReply | Failure:
    """Send `messages`; with `schema`, ask for JSON that follows it. Raises nothing; returns by the deadline."""
    started = time.monotonic()
    url = settings.base_url or DEFAULT_URL

    def late() -> Failure:
        return fault(Fault.TIMEOUT, f"no complete answer from {url} within the {settings.timeout_s:g} s deadline")

    outcome = within_deadline(lambda: _send(settings, messages, schema, price, started), settings.timeout_s, late)
    return _scrubbed(outcome, scrubber_of(settings))


def scrubber_of(settings: StageSettings) -> Scrubber:
    """What must never be written: the stage's key, the usual key variables' values, the URL's credentials."""
    key = api_key(settings)
    keys = [key if key != NO_KEY else None, *(os.environ.get(name) for name in KEY_VARIABLES)]
    return Scrubber.of(*keys, *credential_parts(_userinfo(settings)))


def _userinfo(settings: StageSettings) -> str | None:
    return settings.url_credentials.get_secret_value() if settings.url_credentials else None


def _send(settings: StageSettings, messages, schema, price, started: float) -> LlmReply | Failure:
    """The one call site of the SDK: whatever it raises becomes a Failure here."""
    url = settings.base_url or DEFAULT_URL
    use_schema = schema is not None and settings.structured_output
    try:
        with deadline_client(settings.timeout_s) as http:
            client = openai.OpenAI(
                base_url=join_credentials(settings.base_url, _userinfo(settings)),
                api_key=api_key(settings),
                max_retries=0,
                http_client=http,
            )
            try:
                response = _create(client, settings, messages, schema if use_schema else None)
            except openai.BadRequestError as exc:
                if not (use_schema and _refuses_response_format(exc)):
                    raise
                use_schema = False
                response = _create(client, settings, messages, None)
            return _reply(response, settings, price, time.monotonic() - started, use_schema)
    except openai.APITimeoutError:
        return fault(Fault.TIMEOUT, f"no complete answer from {url} within the {settings.timeout_s:g} s deadline")
    except openai.APIConnectionError as exc:
        return fault(Fault.UNREACHABLE, f"cannot reach the LLM endpoint {url} ({_cause(exc)})")
    except openai.APIStatusError as exc:
        return _status_failure(exc, url)
    except Exception as exc:  # noqa: BLE001 - a body the SDK could not read (HTML, malformed JSON, wrong types)
        return fault(Fault.BAD_BODY, f"{url} sent a body that is not a chat completion ({type(exc).__name__}: {exc})")


def _create(client: openai.OpenAI, settings: StageSettings, messages: list[dict], schema: dict | None):
    extra = {}
    if schema is not None:
        extra["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": settings.stage, "schema": schema, "strict": True},
        }
    return client.chat.completions.create(
        model=settings.model,
        messages=messages,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        **extra,
    )


def _status_failure(exc: openai.APIStatusError, url: str) -> Failure:
    status = exc.status_code
    if status in (401, 403):
        return fault(Fault.AUTH, f"HTTP {status} from {url}: {exc.message}")
    if status == 429:
        wait = retry_after(exc.response.headers)
        said = f"; Retry-After {wait:g} s" if wait is not None else ""
        return fault(Fault.RATE_LIMIT, f"HTTP 429 from {url}{said}: {exc.message}", retry_after_s=wait)
    return fault(f"http_{status}", f"HTTP {status} from {url}: {exc.message}")


def retry_after(headers) -> float | None:
    """Seconds a 429 asks to wait: Retry-After in seconds or as an HTTP date, or retry-after-ms; None if absent."""
    if headers.get("retry-after-ms"):
        seconds = _seconds(headers["retry-after-ms"])
        return None if seconds is None else seconds / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _reply(response, settings: StageSettings, price: Price | None, latency: float, structured: bool):
    """The reply, or a bad_body failure for anything that is not a whole chat completion with plausible usage."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return fault(Fault.BAD_BODY, "the reply has no choices (not a chat completion)")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if text is not None and not isinstance(text, str):
        return fault(Fault.BAD_BODY, f"the reply's message content is a {type(text).__name__}, not text")
    if text and len(text) > settings.max_tokens * MAX_CHARS_PER_TOKEN:
        return fault(Fault.BAD_BODY, f"the reply's {len(text)} characters cannot be {settings.max_tokens} tokens")
    usage = getattr(response, "usage", None)
    prompt_tokens, completion_tokens = (_tokens(usage, name) for name in ("prompt_tokens", "completion_tokens"))
    for value in (prompt_tokens, completion_tokens):
        if isinstance(value, Failure):
            return value
    cost = None
    if price is not None and usage is not None:
        cost = price.cost(prompt_tokens or 0, completion_tokens or 0)
    finish = getattr(choices[0], "finish_reason", None)
    model = getattr(response, "model", None)
    return LlmReply(
        text=text or "",
        finish_reason=finish if isinstance(finish, str) and finish else "unknown",
        model=model if isinstance(model, str) and model else settings.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost,
        latency_s=latency,
        structured=structured,
    )


def _tokens(usage, name: str) -> int | None | Failure:
    """A usage count as an int: absent is None; negative, fractional, NaN, inf or huge is a bad body."""
    value = getattr(usage, name, None) if usage is not None else None
    if value is None:
        return None
    good = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not good or value != int(value) or not 0 <= value <= MAX_USAGE_TOKENS:
        return fault(Fault.BAD_BODY, f"the reply's usage is not a plausible token count: {name}={value!r}")
    return int(value)


def _scrubbed(outcome: LlmReply | Failure, scrub: Scrubber) -> LlmReply | Failure:
    """The outcome with every text normalised, then scrubbed of secrets: what may be stored anywhere. (Normalised
    first: dropping a NUL must not join the two halves of a key after the key was looked for.)"""

    def clean(text: str) -> str:
        return scrub(normalise_text(text))

    def label(text: str, limit: int) -> str:
        return scrub(safe_label(clean(text), limit))

    if isinstance(outcome, Failure):
        return replace(outcome, message=clean(outcome.message)[:MAX_FAILURE_CHARS])
    return replace(
        outcome,
        text=clean(outcome.text),
        finish_reason=label(outcome.finish_reason, 32),
        model=label(outcome.model, 120),
    )


def _refuses_response_format(exc: openai.BadRequestError) -> bool:
    text = str(exc).lower()
    return "response_format" in text or "json_schema" in text


def _cause(exc: BaseException) -> str:
    """The innermost reason of a connection error (refused, unknown host), not the SDK's bare "Connection error."."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


__all__ = ["EndpointFailure", "LlmReply", "chat", "retry_after", "scrubber_of"]
