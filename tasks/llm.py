"""The LLM call as a Prefect task: cached by its rendered prompt, model and sampling settings, retried with
exponential backoff on a transient failure only (429, 5xx, timeouts, lost connections).

A cache hit sends nothing and records nothing, so rerunning a generation neither pays nor counts a call twice.
The price table and the budget are left out of the cache key: changing them must not make finished calls run
again. Only a usable answer is cached. A call that got no reply fails the task (LlmCallFailed, TransientLlmCall),
and so does an unusable or truncated answer (UnusableAnswer, after its row is recorded): Prefect caches no failed
task, so a rerun after raising the budget or fixing the key asks again, and a bad answer is never replayed into
every rerun. `ask` hands the caller an Answer either way, the failure in it as a value (ksci.errors).
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.futures import PrefectFuture
from prefect.tasks import exponential_backoff

from ksci.errors import Failure
from ksci.llm.ask import ask_stage
from ksci.llm.config import Budget, LlmConfig, Price, StageSettings
from ksci.llm.request import Answer, Ledger, StageRequest, failed_call
from tasks.proposing import retry_only_on

LLM_CACHE = (INPUTS - "price" - "budget") + TASK_SOURCE


class LlmCallFailed(RuntimeError):
    """Raised inside the task only: a call without a reply, which Prefect must not cache."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure)  # the failure is its only argument, so a pickled copy is whole
        self.failure = failure

    def __str__(self) -> str:
        return str(self.failure)


class TransientLlmCall(LlmCallFailed):
    """A call that may get a reply if asked again later: Prefect retries it."""


class UnusableAnswer(RuntimeError):
    """Raised inside the task only: an answer that came but cannot be used, which Prefect must not cache (nor
    retry: the writer repairs it with the reason, the designer gets one second chance)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer)  # the answer is its only argument, so a pickled copy is whole
        self.answer = answer

    def __str__(self) -> str:
        return f"{self.answer.failure} (recorded; not cached)"


# Retry only what asking again can fix.
retry_on_transient = retry_only_on(TransientLlmCall)


@task(name="ask-llm", cache_policy=LLM_CACHE, retry_condition_fn=retry_on_transient, retry_jitter_factor=0.5)
def ask_llm(
    request: StageRequest, settings: StageSettings, ledger: Ledger, price: Price | None, budget: Budget
) -> Answer:
    answer = ask_stage(request, settings, ledger, price, budget)
    if answer.reply is None:
        raise (TransientLlmCall if answer.failure.transient else LlmCallFailed)(answer.failure)
    if answer.failure is not None:
        raise UnusableAnswer(answer)
    return answer


class PendingAnswer:
    """A submitted ask_llm; result() waits for it and gives its Answer, a failed call's failure inside it."""

    def __init__(self, future: PrefectFuture) -> None:
        self.future = future

    def result(self) -> Answer:
        try:
            return self.future.result()
        except LlmCallFailed as exc:
            return failed_call(exc.failure)
        except UnusableAnswer as exc:
            return exc.answer


def ask(config: LlmConfig, request: StageRequest, ledger: Ledger) -> PendingAnswer:
    """Send a request with the configured retries and backoff, named after the stage and slot in the Prefect UI."""
    settings = config.stage(request.stage)
    configured = ask_llm.with_options(
        name=f"ask-{request.stage}",
        task_run_name=f"ask-{request.stage}-{request.slot}",
        retries=config.retries,
        retry_delay_seconds=exponential_backoff(backoff_factor=config.retry_delay_s),
    )
    return PendingAnswer(configured.submit(request, settings, ledger, config.price(settings.model), config.budget))
