"""Everything `ksci evolve` can refuse is refused before Prefect starts (issue 26), each with one line on stderr,
exit code 2 and no traceback: run names, strategies, budgets, limits, the --simulate recording, a Jinja syntax
error, and a --run whose lineage belongs to another problem or settings; `ksci report -o` into a missing folder.

Most cases run the command in-process (ksci.cli.main): an exception would fail the test, and the checks come
before anything starts; one case of each kind runs as a subprocess to see the user's stderr whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ksci import cli
from ksci.lineage.identity import claim_run, identity_of, read_identity
from ksci.lineage.store import Candidate, LineageStore
from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "tests" / "data" / "fp8_gemm_h200_recording.json"  # fp8_gemm's, measured on an H200


def _evolve(store: Path, *args: str) -> list[str]:
    return ["evolve", "--problem", "fp8_gemm", "--store", str(store), "--generations", "1", *args]


def _refused(argv: list[str], capsys) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("ksci: error: ")
    return captured.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--simulate", "--run", "../escape"], "invalid run name '../escape'"),
        (["--simulate", "--run", "a/b"], "invalid run name 'a/b'"),
        (["--simulate", "--run", ""], "invalid run name ''"),
        (["--simulate", "--strategy", "bogus"], "--strategy must be one of diverse, elitist, tournament"),
        (["--simulate", "--budget-usd", "-1"], "--budget-usd must be a finite amount above 0 dollars (got -1.0)"),
        (["--simulate", "--budget-usd", "nan"], "--budget-usd must be a finite amount above 0 dollars (got nan)"),
        (["--simulate", "--budget-tokens", "0"], "--budget-tokens must be at least 1 (got 0)"),
        (["--simulate", "--time-limit", "nan"], "--time-limit must be at least 0 minutes, a finite number (got nan)"),
        (["--simulate", "--time-limit", "inf"], "(got inf)"),
        (["--simulate", "--time-limit", "-1"], "(got -1.0)"),
        (["--simulate", "--seed", "-3"], "--seed must be 0 to 4294967295 (got -3)"),
    ],
)
def test_evolve_refuses_bad_settings_in_one_line(tmp_path, capsys, args, said):
    assert said in _refused(_evolve(tmp_path / "runs", *args), capsys)
    assert not (tmp_path / "runs").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "not JSON (Expecting property name"),
        (json.dumps({"a": 1}), "the top level: expected a JSON list of recorded points"),
        (json.dumps([{"template": "mma", "params": {}, "status": "great"}]), "[0].status: Input should be"),
        (json.dumps([{"template": "mma", "params": {}, "status": "ok", "shape_times": {"1x1x1": 5.0}}]),
         "[0] (mma) is ok but has no time for fp8_gemm's benchmark shape 1024x1536x7168"),
    ],
)  # fmt: skip
def test_a_bad_simulate_recording_is_one_line_naming_the_file(tmp_path, capsys, content, said):
    recording = tmp_path / "recording.json"
    recording.write_text(content)
    err = _refused(_evolve(tmp_path / "runs", "--simulate", str(recording)), capsys)
    assert f"--simulate {recording}: " in err and said in err


def test_a_missing_recording_is_one_line(tmp_path, capsys):
    err = _refused(_evolve(tmp_path / "runs", "--simulate", str(tmp_path / "none.json")), capsys)
    assert "cannot read it (No such file or directory)" in err


def test_a_jinja_syntax_error_stops_evolve_before_prefect(tmp_path, capsys, monkeypatch):
    kernels = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels" / "rmsnorm", kernels / "rmsnorm", ignore=shutil.ignore_patterns("solutions"))
    (kernels / "rmsnorm" / "templates" / "cuda" / "vectorized.cu.j2").write_text("{% for x in %}\n")
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(kernels))
    argv = ["evolve", "--problem", "rmsnorm", "--simulate", "--store", str(tmp_path / "runs")]
    assert "vectorized.cu.j2:1: Jinja syntax error" in _refused(argv, capsys)


def _run_of_fp8(store_root: Path, run: str) -> LineageStore:
    """A run of fp8_gemm, simulated with made-up timings, with two candidates and its identity."""
    store = LineageStore(store_root)
    store.append(
        [
            Candidate(run=run, problem="fp8_gemm", generation=0, candidate_id=f"{i}".ljust(16, "0"),
                      proposer="seed", source_path="s", target="cuda", status="ok")
            for i in range(2)
        ]
    )  # fmt: skip
    identity = identity_of(load_problem("fp8_gemm"), "cuda", None, "tuning", "elitist", "")
    assert claim_run(store, run, identity) is None
    return store


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--problem", "rmsnorm", "--simulate"], "this command asks for problem rmsnorm (the run has fp8_gemm)"),
        (["--problem", "fp8_gemm", "--simulate", "--strategy", "diverse"], "strategy diverse (the run has elitist)"),
        (["--problem", "fp8_gemm", "--simulate", str(RECORDING)], "timings simulated (recording"),
    ],
)
def test_run_with_another_problem_or_settings_is_refused_before_prefect(tmp_path, capsys, args, said):
    store = _run_of_fp8(tmp_path / "runs", "mix")
    argv = ["evolve", *args, "--proposer", "tuning", "--store", str(tmp_path / "runs"), "--run", "mix"]
    err = _refused(argv, capsys)
    assert err.startswith("ksci: error: run 'mix' is fp8_gemm on cuda, tuning proposer, elitist, simulated (made-up)")
    assert said in err
    assert len(store.read("mix")) == 2 and read_identity(store, "mix").problem == "fp8_gemm"


def test_a_refusal_reads_as_one_line_without_a_traceback_from_the_shell(tmp_path):
    _run_of_fp8(tmp_path / "runs", "mix")
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 5)
    commands = [
        ["evolve", "--problem", "rmsnorm", "--simulate", "--store", str(tmp_path / "runs"), "--run", "mix"],
        ["evolve", "--problem", "fp8_gemm", "--simulate", str(bad), "--store", str(tmp_path / "runs")],
        ["evolve", "--problem", "fp8_gemm", "--simulate", "--run", "../escape", "--time-limit", "nan"],
        ["report", "--run", "gpu-h200", "--store", str(ROOT / "docs/examples/fp8_gemm-h200-run"),
         "-o", "/missing/dir/x.html"],
    ]  # fmt: skip
    env = {**os.environ, "KSCI_LLM_BASE_URL": ""}
    for argv in commands:
        out = subprocess.run(
            [sys.executable, "-m", "ksci.cli", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
        )
        assert out.returncode == 2 and out.stdout == "", (argv, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, (argv, out.stderr)
    assert out.stderr == "ksci: error: cannot write /missing/dir/x.html: no folder /missing/dir\n"


def test_report_and_render_refuse_an_output_they_cannot_write(tmp_path, capsys):
    example = ["--run", "gpu-h200", "--store", str(ROOT / "docs" / "examples" / "fp8_gemm-h200-run")]
    err = _refused(["report", *example, "-o", str(tmp_path / "missing" / "r.html")], capsys)
    assert f"no folder {tmp_path / 'missing'}" in err
    err = _refused(["render", "--problem", "rmsnorm", "--template", "naive", "-o", str(tmp_path)], capsys)
    assert "is a folder; give a file name" in err
