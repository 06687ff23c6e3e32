"""The LLM call as a Prefect task: cached by its rendered prompt, model and sampling settings, retried with
exponential backoff on TransientLlmError only (429, 5xx, timeouts, lost connections).

A cache hit sends nothing and records nothing, so rerunning a generation neither pays nor counts a call twice.
The price table and the budget are left out of the cache key: changing them must not make finished calls run
again. Failures other than transient ones (LlmCallFailed, BudgetExhausted) fail the task without retry, and a
failed task is never cached, so a rerun after raising the budget or fixing the key asks again.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.tasks import exponential_backoff

from ksci.llm.ask import Answer, Ledger, StageRequest, ask_stage
from ksci.llm.client import TransientLlmError
from ksci.llm.config import Budget, LlmConfig, Price, StageSettings
from tasks.stages import retry_only_on

LLM_CACHE = (INPUTS - "price" - "budget") + TASK_SOURCE


# Retry only what asking again can fix.
retry_on_transient = retry_only_on(TransientLlmError)


@task(name="ask-llm", cache_policy=LLM_CACHE, retry_condition_fn=retry_on_transient, retry_jitter_factor=0.5)
def ask_llm(
    request: StageRequest, settings: StageSettings, ledger: Ledger, price: Price | None, budget: Budget
) -> Answer:
    return ask_stage(request, settings, ledger, price, budget)


def asker(config: LlmConfig):
    """ask_llm with the configured retries and backoff, named after the stage and slot in the Prefect UI."""

    def submit(request: StageRequest, ledger: Ledger):
        settings = config.stage(request.stage)
        configured = ask_llm.with_options(
            name=f"ask-{request.stage}",
            task_run_name=f"ask-{request.stage}-{request.slot}",
            retries=config.retries,
            retry_delay_seconds=exponential_backoff(backoff_factor=config.retry_delay_s),
        )
        return configured.submit(request, settings, ledger, config.price(settings.model), config.budget)

    return submit
