"""The proposer of a run, chosen once from its RunSpec through the registry (ksci.proposers.registry)."""

from __future__ import annotations

from ksci.llm.config import LlmConfig, configured_llm
from ksci.proposers.protocol import Proposer
from ksci.proposers.registry import kind_of
from ksci.run import RunSpec


def llm_for(spec: RunSpec, given: LlmConfig | None) -> LlmConfig | None:
    """The LLM configuration a run uses: the one given (the command line's), else this machine's (a deployment's
    worker reads its own: spec.llm_config, KSCI_LLM_CONFIG, ./ksci.toml, the environment); none for a proposer
    that uses no LLM."""
    if not kind_of(spec.proposer).uses_llm:
        return None
    return given if given is not None else configured_llm(spec.llm_config)


def proposer_for(spec: RunSpec, llm: LlmConfig | None) -> Proposer:
    return kind_of(spec.proposer).make(llm)
