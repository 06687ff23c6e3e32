"""A store that survives damage, and store locations refused before Prefect starts (issue 26, "The store and the run").

Damage: half a Parquet part or a 0-byte part in a run's candidates or llm_calls table is skipped with a warning naming
it; `ksci status`, `ksci report` and `ksci runs` still answer (rc 0) from every other part, and the LLM budget check
still counts the calls it can read. Locations: a read-only folder, a file, memory://, an unknown scheme and a scheme
whose fsspec package is missing are refused in one line with rc 2, before Prefect starts and before anything is
written.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ksci.lineage.storage import check_store_root
from ksci.lineage.store import LineageStore, candidate_from_row
from ksci.llm.config import Budget
from ksci.llm.ledger import LlmCall, LlmLedger

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "fp8_gemm-h200-run"  # one measured run of 20 rows, one part each
RUN = "gpu-h200"
ROWS = 20


def ksci(*args: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(wrap or []), sys.executable, "-m", "ksci.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def _truncate(part: Path) -> None:
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])


def _empty(part: Path) -> None:
    part.write_bytes(b"")


DAMAGE = {"half a part": _truncate, "a 0-byte part": _empty}


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(EXAMPLE, root)
    return root


def _damage_one_part(store: Path, damage: str) -> tuple[Path, str]:
    """Damage the run's last part (generation 4, one row); returns it and the candidate_id of its row."""
    part = sorted((store / RUN / "candidates").glob("part-*.parquet"))[-1]
    (lost_id,) = pq.read_table(part, columns=["candidate_id"]).column("candidate_id").to_pylist()
    DAMAGE[damage](part)
    return part, lost_id


def _one_warning_naming(stderr: str, part: Path) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("ksci: warning: skipped damaged part") and part.name in lines[0], stderr


@pytest.mark.parametrize("damage", DAMAGE)
def test_status_skips_a_damaged_part_names_it_and_reads_the_rest(store, damage):
    part, lost_id = _damage_one_part(store, damage)
    out = ksci("status", "--run", RUN, "--store", str(store))
    assert out.returncode == 0, out.stderr
    _one_warning_naming(out.stderr, part)
    assert f"{ROWS - 1} candidates" in out.stdout.splitlines()[0], out.stdout
    frame = LineageStore(store).read(RUN)  # the rows of every other part, none lost
    assert len(frame) == ROWS - 1 and lost_id not in set(frame["candidate_id"])


@pytest.mark.parametrize("damage", DAMAGE)
def test_report_skips_a_damaged_part_names_it_and_writes_the_page(store, tmp_path, damage):
    part, _ = _damage_one_part(store, damage)
    page = tmp_path / "report.html"
    out = ksci("report", "--run", RUN, "--store", str(store), "-o", str(page))
    assert out.returncode == 0, out.stderr
    _one_warning_naming(out.stderr, part)
    assert out.stdout == f"wrote {page}\n" and page.stat().st_size > 0


@pytest.mark.parametrize("damage", DAMAGE)
def test_runs_skips_a_damaged_part_and_counts_the_rest(store, damage):
    part, _ = _damage_one_part(store, damage)
    out = ksci("runs", "--store", str(store))
    assert out.returncode == 0, out.stderr
    _one_warning_naming(out.stderr, part)
    assert any(line.startswith(f"{RUN} ") and f" {ROWS - 1} " in line for line in out.stdout.splitlines())


def test_an_append_after_damage_writes_the_lost_row_again_and_keeps_the_others(store):
    """The damaged part's rows count as not stored, so continuing a run records them anew; no other row twice."""
    before = LineageStore(store).read(RUN)
    _part, lost_id = _damage_one_part(store, "half a part")
    again = [candidate_from_row(row) for _, row in before.iterrows()]
    assert LineageStore(store).append(again) == 1  # only the lost row: the others were read
    after = LineageStore(store).read(RUN)
    assert len(after) == ROWS and after["candidate_id"].is_unique and lost_id in set(after["candidate_id"])


def _call(generation: int, tokens: int) -> LlmCall:
    return LlmCall(
        run="llm-run",
        generation=generation,
        stage="writer",
        slot=f"plan-{generation}",
        model="m",
        prompt_sha256="0" * 64,
        prompt_tokens=tokens,
        completion_tokens=tokens,
        cost_usd=0.5,
        outcome="ok",
    )


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_budget_check_counts_the_calls_beside_a_damaged_llm_calls_part(tmp_path, damage, caplog):
    ledger = LlmLedger(tmp_path)
    ledger.record(_call(0, 1000))
    ledger.record(_call(1, 2000))
    parts = sorted((tmp_path / "llm-run" / "llm_calls").glob("part-*.parquet"))
    DAMAGE[damage](parts[-1])
    tokens, usd = ledger.spent("llm-run")
    assert (tokens, usd) == (2000, 0.5)  # generation 0's call still counts; the damaged one cannot
    assert Budget(tokens=1000).exceeded(tokens, usd) == "token budget spent: 2000 of 1000 tokens"
    assert Budget(tokens=10_000).exceeded(tokens, usd) is None
    assert any(parts[-1].name in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    ledger.record(_call(2, 10))  # and the run goes on recording
    assert ledger.spent("llm-run")[0] == 2020


# --- store locations refused before Prefect starts ------------------------------------------------------------


def _evolve(store: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    return ksci("evolve", "--problem", "fp8_gemm", "--simulate", "--generations", "1", "--store", store, wrap=wrap)


def _refused_in_one_line(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("ksci: error: the store ") and "Traceback" not in out.stderr
    assert "prefect" not in out.stderr.lower(), out.stderr  # refused before Prefect started
    for word in words:
        assert word in out.stderr, out.stderr


def _read_only_wrapper(folder: Path) -> list[str]:
    """A command prefix that runs the CLI where `folder` is read-only: as root (whom permissions do not stop) a
    read-only bind mount in a mount namespace of its own; as anyone else, permissions alone."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("root, and no mount namespace to make a folder read-only in (unshare -m)")
    return [unshare, "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(folder)]


def test_evolve_refuses_a_read_only_store_and_writes_nothing(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    out = _evolve(str(folder), wrap=_read_only_wrapper(folder))
    _refused_in_one_line(out, str(folder), "read-only")
    assert list(folder.iterdir()) == []


def test_evolve_refuses_a_store_under_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    out = _evolve(str(folder / "runs"), wrap=_read_only_wrapper(folder))
    _refused_in_one_line(out, "cannot be created", "read-only")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", ["evolve", "status", "runs"])
def test_a_store_that_is_a_file_is_refused(tmp_path, command):
    file = tmp_path / "store.txt"
    file.write_text("not a store\n")
    if command == "evolve":
        out = _evolve(str(file))
    else:
        out = ksci(command, *(["--run", RUN] if command == "status" else []), "--store", str(file))
    _refused_in_one_line(out, str(file), "is a file")
    assert file.read_text() == "not a store\n"


@pytest.mark.parametrize("command", ["evolve", "runs"])
def test_a_store_in_memory_is_refused(command):
    out = _evolve("memory://runs") if command == "evolve" else ksci("runs", "--store", "memory://runs")
    _refused_in_one_line(out, "memory://runs", "lost")


@pytest.mark.parametrize("command", ["evolve", "runs"])
def test_an_unknown_url_scheme_is_refused(command):
    url = "nosuchfs://bucket/runs"
    out = _evolve(url) if command == "evolve" else ksci("runs", "--store", url)
    _refused_in_one_line(out, url, "unknown URL scheme nosuchfs://")


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed here")
@pytest.mark.parametrize("command", ["evolve", "status"])
def test_s3_without_s3fs_names_the_package_to_install(command):
    url = "s3://bucket/ksci/runs"  # the help's own example
    out = _evolve(url) if command == "evolve" else ksci("status", "--run", "r", "--store", url)
    _refused_in_one_line(out, url, "pip install s3fs")


def test_check_store_root_accepts_what_can_hold_a_store(tmp_path):
    assert check_store_root(tmp_path, write=True) is None
    assert check_store_root(tmp_path / "new" / "runs", write=True) is None  # made on the first write
    assert check_store_root(f"file://{tmp_path}", write=True) is None
    assert check_store_root(tmp_path / "missing", write=False) is None  # ksci.commands refuses a --store not there
    assert check_store_root("", write=False) == "the store's location is empty: give a folder or an fsspec URL"
