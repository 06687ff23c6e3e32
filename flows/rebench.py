"""Re-time a run's champions, for example after a driver or compiler change.

Each champion goes through the evaluation chain every candidate takes (tasks.evaluation.submit_candidate: hipify,
compile, verify and benchmark, record), its stored source as it is: that source was prepared when it was first
evaluated, so hipify only checks its entry point again. Verify and benchmark skip the cache (retime), so the
timing is new; the rows go to the run `<run>-rebench`, one generation per rebench, with the champion's source
path, so the original lineage is never rewritten.
"""

from __future__ import annotations

import json

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.store import CandidateMeta, LineageStore
from ksci.report.generation_summary import artifact_key
from ksci.run import DEFAULT_STORE
from tasks.evaluation import submit_candidate


@flow(name="rebench")
def rebench(
    run: str, top: int = 3, store_root: str = DEFAULT_STORE, gpus: list[str] | None = None, simulate: str | None = None
) -> list[dict]:
    logger = get_run_logger()
    store = LineageStore(store_root)
    champions = store.ranked(run, top)
    if champions.empty:
        logger.warning("run %s has no passing candidate to re-time", run)
        return []
    gpus = gpus or ["0"]
    target_run = f"{run}-rebench"
    generation = store.generations(target_run)
    rows = []
    for _, champion in champions.iterrows():
        setup = EvaluationSetup(
            champion["problem"], champion["target"], store_root, champion["arch"], tuple(gpus), simulate
        )
        meta = CandidateMeta(
            run=target_run,
            generation=generation,
            proposer="rebench",
            parent_id=champion["candidate_id"],
            reference_id=None,
            hypothesis=f"re-timing of {champion['candidate_id']} (was {champion['geomean_us']:.2f} us)",
            template=champion["template"],
            params=_params(champion),
        )
        source = store.read_source(champion["source_path"])
        chain = submit_candidate(setup, source, meta, source_path=champion["source_path"], retime=True)
        row = chain.recorded.result()
        rows.append(
            {
                "candidate_id": champion["candidate_id"],
                "before_us": champion["geomean_us"],
                "after_us": row["geomean_us"],
                "status": row["status"],
            }
        )
    create_table_artifact(rows, key=artifact_key(f"{target_run}-{generation}"), description=f"re-timing of {run}")
    return rows


def _params(row) -> dict | None:
    return json.loads(row["params_json"]) if row["params_json"] else None
