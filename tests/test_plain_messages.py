"""Messages that say what happened (issue 51): the LLM budget's refusal names the tokens spent and those reserved
by calls in flight apart; `ksci evolve --run` continuing a run with a damaged part warns as `ksci status` does; a
FIFO or a folder given as `ksci evaluate --source` is "not a regular file" (rc 2), not "no such file"."""

from __future__ import annotations

import os

import pytest
from support.full_disk import rows

from ksci import cli
from ksci.lineage.store import LineageStore
from ksci.llm.budget import Need, Reservations
from ksci.llm.config import Budget


def test_the_budget_refusal_says_spent_and_reserved_apart():
    reservations, budget, spent = Reservations(), Budget(tokens=8000), lambda: (3012, 0.0)
    with reservations.hold(("store", "run"), budget, spent, Need(7389, 0.0)) as first:
        assert first is None
        with reservations.hold(("store", "run"), budget, spent, Need(7389, 0.0)) as second:
            assert second is not None and "\n" not in second
            assert "3012 tokens spent and 7389 reserved by calls in flight, of 8000" in second
            assert "10401" not in second  # spent plus reserved is not what was spent


def test_continuing_a_run_with_a_damaged_part_warns_on_stderr(tmp_path, monkeypatch, capsys):
    store = LineageStore(tmp_path / "runs")
    store.append(rows(3))
    store.append(rows(2, generation=1))
    damaged = sorted((tmp_path / "runs" / "full" / "candidates").glob("part-000000-*.parquet"))[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    monkeypatch.setattr(cli, "_evolve", lambda *args: [])  # the flow itself is not what is tested here
    argv = ["evolve", "--problem", "fp8_gemm", "--target", "cuda", "--store", str(tmp_path / "runs"), "--run", "full"]
    assert cli.main([*argv, "--simulate", "--generations", "1", "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ksci: warning: ")]
    assert len(warnings) == 1 and f"skipped damaged part {damaged}" in warnings[0]


@pytest.mark.parametrize("kind", ["FIFO", "folder"])
def test_a_source_that_is_not_a_regular_file_says_so(tmp_path, capsys, kind):
    source = tmp_path / "kernel.cu"
    if kind == "FIFO":
        os.mkfifo(source)
    else:
        source.mkdir()
    assert cli.main(["evaluate", "--problem", "rmsnorm", "--source", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{source} is not a regular file (a {kind})" in err
    assert "no such file" not in err
