"""What a generation shows in the Prefect UI: a table of its candidates and a markdown summary
(ksci.report.generation_summary makes them)."""

from __future__ import annotations

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from ksci.report.generation_summary import artifact_key, generation_markdown, table_rows


def publish_generation(run: str, generation: int, rows: list[dict], store_root: str) -> None:
    key = artifact_key(f"{run}-gen-{generation}")
    create_table_artifact(table_rows(rows), key=key, description="candidates of this generation")
    create_markdown_artifact(generation_markdown(run, generation, rows, store_root), key=f"{key}-summary")
