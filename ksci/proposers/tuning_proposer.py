"""The tuning proposer as a Proposer (ksci.proposers.protocol): select parents, hypothesize children (Optuna over
the seed templates' parameters, per shape too: ksci.proposers.optuna_search), render or compose each, submit it.

An empty population is seeded: every template family's default point (the proposer is then named "seed"). In an
overlapping run it avoids what the generations still running proposed, and hands its own proposals on to the ones
after it (ksci.proposers.overlap).
"""

from __future__ import annotations

from ksci.lineage.store import CandidateMeta
from ksci.problem.spec import load_problem
from ksci.proposers import overlap
from ksci.proposers.protocol import GenerationContext, Proposed, Steps
from ksci.proposers.space import Proposal, space_note
from ksci.run import RunSpec

NAME = "tuning"  # its entry in ksci.proposers.registry


class TuningProposer:
    def propose(self, context: GenerationContext, steps: Steps) -> Proposed:
        spec, generation = context.spec, context.generation
        proposals, in_flight = self._hypothesize(context, steps)
        by = "seed" if context.population.empty else "tuning"
        note = space_note(load_problem(spec.problem), context.dialect, context.population, proposals + in_flight)
        steps.logger.info(
            "generation %d: %d proposals from %s%s", generation, len(proposals), by, f" ({note})" * bool(note)
        )
        chains = [steps.submit(self._source(context, p, steps), self._meta(context, p, by)) for p in proposals]
        return Proposed(chains, note)

    def conclude(self, context: GenerationContext, rows: list[dict], steps: Steps) -> None:
        """Tuning learns from the lineage rows themselves: nothing to distil."""

    def stop_reason(self, spec: RunSpec) -> str | None:
        return None

    @staticmethod
    def _hypothesize(context: GenerationContext, steps: Steps) -> tuple[list[Proposal], list[Proposal]]:
        """This generation's proposals, and those of the generations it overlaps (which it must not repeat).
        A failure before the post reaches the board through the flow, which posts the error instead."""
        spec, seed = context.spec, context.turn_seed
        in_flight = overlap.in_flight(spec.store_root, spec.run, context.generation, spec.overlap)
        selections = steps.select(spec.strategy, context.population, spec.children, seed)
        proposals = steps.proposer_step(
            NAME, spec.problem, context.dialect, context.population, selections, spec.children, seed, in_flight or None
        )
        if spec.overlap:
            overlap.post(spec.store_root, spec.run, context.generation, proposals)
        return list(proposals), in_flight

    @staticmethod
    def _source(context: GenerationContext, proposal: Proposal, steps: Steps):
        """A composition of points by shape (ksci.problem.compose), or one template point."""
        if proposal.by_shape:
            return steps.compose(context.spec.problem, context.dialect, proposal.by_shape)
        return steps.render(context.spec.problem, context.dialect, proposal.template, proposal.params)

    @staticmethod
    def _meta(context: GenerationContext, proposal: Proposal, by: str) -> CandidateMeta:
        return CandidateMeta(
            run=context.spec.run,
            generation=context.generation,
            proposer=by,
            parent_id=proposal.parent_id,
            reference_id=proposal.reference_id,
            hypothesis=proposal.hypothesis,
            template=proposal.template,
            params=proposal.params,
            params_by_shape=proposal.by_shape,
        )


def make(llm=None) -> TuningProposer:
    """The registry's factory (ksci.proposers.registry): tuning reads no LLM configuration."""
    return TuningProposer()
