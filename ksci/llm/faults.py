"""What can go wrong with an LLM endpoint, as kinds of ksci.errors.Failure, and the one fault that stops a run.

Every fault of a call is a value (EndpointFailure) with one of these kinds; an HTTP status the kinds do not name is
kept as `http_<status>` (5xx: transient, other 4xx: not). Only a refused key ends the run: every later call would be
refused too, so asking on would only fill the ledger (LlmEndpointRefused, exit code 3 through ksci.cli).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ksci.errors import BUDGET, Failure
from ksci.evaluate.options import EnvironmentProblem


class Fault(StrEnum):
    AUTH = "auth"  # 401 or 403: the key is wrong, expired or lacks access
    RATE_LIMIT = "rate_limit"  # 429: asked again after Retry-After (capped) or Prefect's backoff
    BAD_BODY = "bad_body"  # HTTP 200 but not a chat completion: HTML, malformed JSON, no choices, absurd usage
    TIMEOUT = "timeout"  # no complete answer within the call's wall-clock deadline
    BUDGET = BUDGET  # the run's token or money budget is spent (nothing is sent)
    UNREACHABLE = "unreachable"  # no connection to the endpoint (refused, no route, unknown host)


TRANSIENT = {Fault.RATE_LIMIT, Fault.TIMEOUT, Fault.UNREACHABLE}


@dataclass(frozen=True)
class EndpointFailure(Failure):
    """A failed call; `retry_after_s`: how long a 429's Retry-After header asked to wait (None when absent)."""

    retry_after_s: float | None = None


def fault(kind: Fault | str, message: str, retry_after_s: float | None = None) -> EndpointFailure:
    """A failure of `kind`, transient when asking again later may help (the kinds above, and 5xx statuses)."""
    transient = kind in TRANSIENT or (str(kind).startswith("http_5"))
    return EndpointFailure(str(kind), message, transient, retry_after_s)


class LlmEndpointRefused(EnvironmentProblem):
    """The endpoint refused the API key (401/403): the run stops at once (ksci.cli: one line, exit code 3)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure)  # the failure is its only argument, so that a pickled copy is whole
        self.failure = failure

    def __str__(self) -> str:
        return (
            f"the LLM endpoint refused the API key ({self.failure.message}); check KSCI_LLM_API_KEY / "
            "OPENAI_API_KEY (or api_key_env), then rerun with the same --run"
        )
