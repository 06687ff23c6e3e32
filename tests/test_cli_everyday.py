"""The everyday commands of issue 27: `ksci --version`, `ksci runs`, help and defaults on every option, a closed pipe
that ends quietly, and `ksci report` writing beside the run's lineage by default."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ksci import __version__, cli
from ksci.backends.simulated import SIMULATED_GPU
from ksci.lineage.store import Candidate, LineageStore

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "fp8_gemm-h200-run"  # one measured run, gpu-h200 (tests/test_report.py)
RUN = "gpu-h200"


def ksci(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ksci.cli", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.fixture
def store(tmp_path) -> Path:
    """The example store, plus a simulated run (one ok row, one compile error) and a folder that is no run."""
    root = tmp_path / "runs"
    shutil.copytree(EXAMPLE, root)
    rows = [
        _simulated_row("a" * 16, "ok", geomean_us=85.35, gpu=SIMULATED_GPU, fingerprint={"gpu": SIMULATED_GPU}),
        _simulated_row("b" * 16, "compile_error", fingerprint={"toolchain": "simulator", "gpu": None}),
    ]
    LineageStore(root).append(rows)
    (root / "notes").mkdir()  # a stray folder: no candidates table, so not a run
    return root


def _simulated_row(candidate_id: str, status: str, *, fingerprint: dict, **values) -> Candidate:
    return Candidate(
        run="sim-1",
        problem="fp8_gemm",
        generation=0,
        candidate_id=candidate_id,
        proposer="seed",
        source_path=f"sources/{candidate_id[:2]}/{candidate_id}.cu",
        target="cuda",
        status=status,
        vendor_geomean_us=100.0 if status == "ok" else None,
        speedup_vs_vendor=100.0 / 85.35 if status == "ok" else None,
        fingerprint_json=json.dumps(fingerprint),
        **values,
    )


def test_version_prints_the_package_version():
    out = ksci("--version")
    assert out.returncode == 0 and out.stdout == f"ksci {__version__}\n"


@pytest.mark.parametrize("make", [False, True])
def test_runs_of_an_empty_or_missing_store_is_one_line(tmp_path, make):
    """An empty store has no runs (rc 0); a --store that is not there is a mistyped path, refused naming it (rc 2;
    it said "no runs" with rc 0 before)."""
    root = tmp_path / "nothing"
    if make:
        (root / "sources").mkdir(parents=True)  # sources alone: still no run
    out = ksci("runs", "--store", str(root))
    if not make:
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == f"ksci: error: no store at {root}: the folder does not exist\n"
        return
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.count("\n") == 1 and out.stdout.startswith("no runs in ")
    assert json.loads(ksci("runs", "--store", str(root), "--json").stdout) == []


def test_runs_lists_each_run_once_and_marks_the_simulated_one(store):
    out = ksci("runs", "--store", str(store))
    assert out.returncode == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    assert header.split()[:4] == ["run", "problem", "target", "timings"]
    by_run = {line.split()[0]: line for line in lines}
    assert sorted(by_run) == ["gpu-h200", "sim-1"]  # not sources, not notes
    assert "measured" in by_run["gpu-h200"] and "234.55 us" in by_run["gpu-h200"]
    assert "4.93x slower" in by_run["gpu-h200"] and "2026-11-21 11:43" in by_run["gpu-h200"]
    assert "simulated" in by_run["sim-1"] and "85.35 us (sim)" in by_run["sim-1"] and "1.17x faster" in by_run["sim-1"]

    listed = {r["name"]: r for r in json.loads(ksci("runs", "--store", str(store), "--json").stdout)}
    measured, simulated = listed["gpu-h200"], listed["sim-1"]
    assert (measured["problem"], measured["target"], measured["simulated"], measured["candidates"]) == (
        "fp8_gemm",
        "cuda",
        False,
        20,
    )
    assert measured["best_us"] == pytest.approx(LineageStore(store).best(RUN)["geomean_us"])
    assert measured["last_time"].startswith("2026-11-21T11:43")
    assert simulated["simulated"] is True and simulated["candidates"] == 2 and simulated["best_us"] == 85.35


def test_a_run_of_only_failed_simulated_compiles_is_marked_by_its_toolchain(tmp_path):
    root = tmp_path / "runs"
    LineageStore(root).append([_simulated_row("c" * 16, "compile_error", fingerprint={"toolchain": "simulator"})])
    listed = json.loads(ksci("runs", "--store", str(root), "--json").stdout)
    assert [(r["name"], r["simulated"], r["best_us"], r["vendor_ratio"]) for r in listed] == [
        ("sim-1", True, None, None)
    ]


def test_a_damaged_part_is_skipped_with_a_warning_naming_it(store):
    damaged = store / RUN / "candidates" / "part-000009-0123456789abcdef.parquet"
    damaged.write_bytes(b"PAR1 cut short")
    out = ksci("runs", "--store", str(store))
    assert out.returncode == 0
    assert "warning: skipped" in out.stderr and damaged.name in out.stderr and "Traceback" not in out.stderr
    assert any(line.startswith("gpu-h200 ") and " 20 " in line for line in out.stdout.splitlines())


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_has_help_and_says_its_default(command):
    for action in _subcommands()[command]._actions:
        assert action.help, f"ksci {command} {action.option_strings or action.dest} has no help"
        if action.default not in (None, False, [], argparse.SUPPRESS) and action.option_strings:
            assert "%(default)s" in action.help, f"ksci {command} {action.option_strings} hides its default"


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_no_option_is_taken_by_an_abbreviation(command):
    """`--generation 2` is not `--generations 2` (tests/test_cli.py runs it)."""
    assert not cli.build_parser().allow_abbrev and not _subcommands()[command].allow_abbrev


def test_evolve_help_names_the_defaults():
    text = " ".join(ksci("evolve", "--help").stdout.split())
    for expected in ("--generations N generations to run (default: 5)", "(default: cuda)", "(default: 0)"):
        assert expected in text
    assert "--arch ARCH GPU architecture" in text and "--problem PROBLEM a problem's name" in text


@pytest.mark.parametrize(
    "args",
    [
        ("problems", "--json"),
        ("problems",),
        ("runs", "--store", str(EXAMPLE)),
        ("status", "--run", RUN, "--store", str(EXAMPLE)),
    ],
)
def test_a_closed_pipe_ends_quietly(args):
    """The reader is gone before ksci writes a byte: every write fails with EPIPE (Python ignores SIGPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = ksci(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert out.returncode == 0 and out.stderr == ""


def test_piping_into_head_ends_quietly():
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m ksci.cli problems --json | head -1; echo rc=$?"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.stdout == "[\nrc=0\n" and out.stderr == ""


def test_report_without_output_writes_into_the_runs_folder(store, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli.main(["report", "--run", RUN, "--store", str(store)]) == 0
    written = store / RUN / "report.html"
    assert capsys.readouterr().out == f"wrote {written}\n"
    assert written.read_text().startswith("<!DOCTYPE html>") and list(elsewhere.iterdir()) == []
    assert [p.name for p in (store / RUN).iterdir() if p.name.startswith(".")] == []  # no temp file left
    assert "gpu-h200" in ksci("runs", "--store", str(store)).stdout  # the report leaves the run a run
