"""The proposer of a run, chosen once from its RunSpec: the tuning proposer, or the LLM scientist (which seeds a
problem that has templates with the tuning proposer's generation 0)."""

from __future__ import annotations

from ksci.llm.config import LlmConfig, configured_llm
from ksci.proposers.protocol import Proposer
from ksci.proposers.scientist import ScientistProposer
from ksci.proposers.tuning_proposer import TuningProposer
from ksci.run import RunSpec


def llm_for(spec: RunSpec, given: LlmConfig | None) -> LlmConfig | None:
    """The LLM configuration a run uses: the one given (the command line's), else this machine's (a deployment's
    worker reads its own: spec.llm_config, KSCI_LLM_CONFIG, ./ksci.toml, the environment); none for tuning."""
    if spec.proposer != "llm":
        return None
    return given if given is not None else configured_llm(spec.llm_config)


def proposer_for(spec: RunSpec, llm: LlmConfig | None) -> Proposer:
    if spec.proposer == "llm":
        if llm is None:
            raise ValueError("the llm proposer needs an LLM configuration")
        return ScientistProposer(llm, seeds=TuningProposer())
    return TuningProposer()
