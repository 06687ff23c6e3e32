"""One function that sends chat messages to an OpenAI-compatible endpoint with the openai SDK.

The SDK's own retries are off (max_retries=0): Prefect owns retries (tasks/llm.py), and retries only a transient
failure (429, 5xx, timeouts, connection errors). Every outcome is a value: an LlmReply, or a ksci.errors.Failure
saying why (`transient` tells whether asking again may help).
Structured stages ask for `response_format={"type": "json_schema", ...}`; an endpoint that refuses it (a 400 that
names response_format or json_schema, as older vLLM, Ollama or proxies answer) is asked again in plain text and
the tolerant parser (ksci.llm.parse) reads the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import openai

from ksci.errors import Failure
from ksci.llm.config import Price, StageSettings, api_key


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
    """Send `messages`; with `schema`, ask for JSON that follows it. Raises nothing the SDK raises."""
    key = api_key(settings)
    client = openai.OpenAI(base_url=settings.base_url, api_key=key, max_retries=0, timeout=settings.timeout_s)
    use_schema = schema is not None and settings.structured_output
    started = time.monotonic()
    try:
        try:
            response = _create(client, settings, messages, schema if use_schema else None)
        except openai.BadRequestError as exc:
            if not (use_schema and _refuses_response_format(exc)):
                raise
            use_schema = False
            response = _create(client, settings, messages, None)
    except openai.APITimeoutError as exc:
        return Failure("timeout", _scrub(str(exc), key), transient=True)
    except openai.APIConnectionError as exc:
        return Failure("connection", _scrub(str(exc), key), transient=True)
    except openai.RateLimitError as exc:
        return Failure("rate_limit", _scrub(str(exc), key), transient=True)
    except openai.APIStatusError as exc:  # 5xx (InternalServerError among them) may pass; 4xx will not
        return Failure(f"http_{exc.status_code}", _scrub(str(exc), key), transient=exc.status_code >= 500)
    except openai.OpenAIError as exc:  # a reply the SDK could not read
        return Failure("bad_response", _scrub(str(exc), key))
    return _reply(response, settings, price, time.monotonic() - started, use_schema)


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


def _reply(response, settings: StageSettings, price: Price | None, latency: float, structured: bool):
    if not response.choices:
        return Failure("bad_response", "the reply has no choices")
    choice = response.choices[0]
    usage = response.usage
    prompt_tokens = usage.prompt_tokens if usage else None
    completion_tokens = usage.completion_tokens if usage else None
    cost = None
    if price is not None and usage is not None:
        cost = price.cost(prompt_tokens or 0, completion_tokens or 0)
    return LlmReply(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason or "unknown",
        model=response.model or settings.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost,
        latency_s=latency,
        structured=structured,
    )


def _refuses_response_format(exc: openai.BadRequestError) -> bool:
    text = str(exc).lower()
    return "response_format" in text or "json_schema" in text


def _scrub(text: str, key: str) -> str:
    """Error texts can quote request details; make sure the key is never among them."""
    return text.replace(key, "***") if len(key) > 4 else text
