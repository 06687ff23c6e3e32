"""The end-of-run table that `ksci evolve` prints."""

from __future__ import annotations

from ksci.report.summary import format_evolution


def _summary(rows: list[dict]) -> dict:
    counts = {"compiled": len(rows), "compile_cache_hits": 0, "benchmarked": len(rows), "benchmark_cache_hits": 0}
    return {"run": "r", "generation": 0, "candidates": len(rows), "rows": rows, **counts}


def _row(cid: str, geomean: float, **origin) -> dict:
    return {"candidate_id": cid, "status": "ok", "geomean_us": geomean, "source_path": f"sources/{cid}.cu", **origin}


def test_the_best_kernel_says_where_it_came_from() -> None:
    templated = _row("a" * 16, 300.0, template="mma", params_json='{"BM": 64}', proposer="tuning")
    written = _row("b" * 16, 200.0, template=None, params_json=None, proposer="llm", llm_model="gpt-x")
    text = format_evolution([_summary([templated, written])], "/store")
    assert f"best {'b' * 16} (written by gpt-x)" in text and "None" not in text
    text = format_evolution([_summary([templated])], "/store")
    assert f'best {"a" * 16} (mma {{"BM": 64}})' in text


def test_a_run_where_nothing_passed_says_so() -> None:
    failed = {**_row("c" * 16, 0.0), "status": "wrong", "geomean_us": None}
    assert format_evolution([_summary([failed])], "/store").endswith("no candidate passed")


def test_the_table_shows_each_generations_best_the_best_so_far_and_what_was_new_or_cached() -> None:
    first = _summary([_row("a" * 16, 300.0), _row("b" * 16, 200.0)])
    second = {**_summary([_row("c" * 16, 250.0)]), "generation": 1, "compile_cache_hits": 2, "benchmark_cache_hits": 1}
    lines = format_evolution([first, second], "/store").splitlines()
    assert lines[0].split() == ["gen", "cands", "ok", "gen", "best", "us", "best", "so", "far", "us",
                                "compiles", "new/cached", "timings", "new/cached"]  # fmt: skip
    assert lines[1].split() == ["0", "2", "2", "200.00", "200.00", "2/0", "2/0"]
    assert lines[2].split() == ["1", "1", "1", "250.00", "200.00", "1/2", "1/1"]  # its own best is not the run's
