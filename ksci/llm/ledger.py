"""What the LLM stages cost and learnt, stored with the run beside its lineage (same atomic part files):

    <root>/<run>/llm_calls/part-<generation>-<uuid>.parquet   one row per request actually sent to the endpoint
    <root>/<run>/findings/part-<generation>-<uuid>.parquet    the findings distilled after each generation

A call answered from Prefect's cache sends nothing and adds no row, so a rerun never records a cost twice. No row
holds the API key: the config keeps only the name of its environment variable, and the base URL is not stored.
See docs/lineage-schema.md for the columns.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ksci.lineage.parts import check_run as _check_run
from ksci.lineage.parts import read_tables
from ksci.lineage.parts import to_pandas as _to_pandas
from ksci.lineage.storage import Storage

CALLS_SCHEMA = pa.schema(
    [
        pa.field("run", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("slot", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("prompt_sha256", pa.string(), nullable=False),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("cost_usd", pa.float64()),
        pa.field("latency_s", pa.float64()),
        pa.field("finish_reason", pa.string()),
        pa.field("structured", pa.bool_()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)

FINDINGS_SCHEMA = pa.schema(
    [
        pa.field("run", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("evidence", pa.string(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


@dataclass(kw_only=True)
class LlmCall:
    """One request sent to the endpoint. outcome: ok, unusable, truncated, or the transport failure's kind."""

    run: str
    generation: int
    stage: str
    slot: str  # which candidate or attempt inside the stage, e.g. "plan-2/attempt-1"
    model: str
    prompt_sha256: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    finish_reason: str | None = None
    structured: bool | None = None
    outcome: str
    detail: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class Finding:
    kind: str  # worked, failed or insight
    text: str
    evidence: str = ""


class LlmLedger:
    """The llm_calls and findings tables of the runs under one store root."""

    def __init__(self, root: str | Path) -> None:
        self.storage = Storage(root)

    def record(self, call: LlmCall) -> None:
        table = pa.Table.from_pylist([asdict(call)], schema=CALLS_SCHEMA)
        self._write(call.run, "llm_calls", call.generation, table)

    def calls(self, run: str) -> pd.DataFrame:
        return self._read(run, "llm_calls", CALLS_SCHEMA)

    def spent(self, run: str) -> tuple[int, float]:
        """(tokens, US dollars) this run has paid for so far."""
        calls = self.calls(run)
        if calls.empty:
            return 0, 0.0
        tokens = int(calls["prompt_tokens"].fillna(0).sum() + calls["completion_tokens"].fillna(0).sum())
        return tokens, float(calls["cost_usd"].fillna(0.0).sum())

    def add_findings(self, run: str, generation: int, findings: list[Finding]) -> int:
        """Store a generation's findings once; a rerun of the generation adds nothing. Returns rows written."""
        known = self.findings(run)
        if not findings or (not known.empty and (known["generation"] == generation).any()):
            return 0
        now = datetime.now(UTC)
        rows = [{"run": run, "generation": generation, **asdict(f), "created_at": now} for f in findings]
        self._write(run, "findings", generation, pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA))
        return len(rows)

    def findings(self, run: str) -> pd.DataFrame:
        return self._read(run, "findings", FINDINGS_SCHEMA)

    def _write(self, run: str, table_name: str, generation: int, table: pa.Table) -> None:
        _check_run(run)
        name = f"part-{generation:06d}-{uuid.uuid4().hex}.parquet"
        self.storage.write_atomic(self.storage.path(run, table_name, name), lambda f: pq.write_table(table, f))

    def _read(self, run: str, table_name: str, schema: pa.Schema) -> pd.DataFrame:
        _check_run(run)
        tables = read_tables(self.storage, self.storage.path(run, table_name))  # a damaged part: skipped, logged
        if not tables:
            return _to_pandas(schema.empty_table())
        frame = _to_pandas(pa.concat_tables([table.cast(schema) for table in tables]))
        return frame.sort_values(["generation", "created_at"], kind="stable").reset_index(drop=True)


def summarize_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """Per stage: requests, outcomes, tokens, cost, mean latency."""
    if calls.empty:
        return pd.DataFrame(columns=["stage", "requests", "ok", "failed", "tokens", "cost_usd", "mean_latency_s"])
    grouped = calls.groupby("stage", sort=False)
    return pd.DataFrame(
        {
            "requests": grouped.size(),
            "ok": grouped["outcome"].apply(lambda s: int((s == "ok").sum())),
            "failed": grouped["outcome"].apply(lambda s: int((s != "ok").sum())),
            "tokens": grouped.apply(
                lambda g: int(g["prompt_tokens"].fillna(0).sum() + g["completion_tokens"].fillna(0).sum()),
                include_groups=False,
            ),
            "cost_usd": grouped["cost_usd"].apply(lambda s: float(s.fillna(0.0).sum())),
            "mean_latency_s": grouped["latency_s"].mean().round(3),
        }
    ).reset_index()
