"""What the hardware says reaches the LLM (issue 29): one LLM generation of the scientist (ksci.proposers.scientist)
against the SCRIPTED endpoint (tests/support/scripted_llm_server.py, the real openai SDK and ksci.llm.ask), the
evaluation faked as in tests/test_scientist.py. The designer's and the writer's prompts, as the endpoint received
them, hold the Base's per-shape standing, the resource report of Base and Reference, and the profile digest, made
by the real profile path (ksci.profile.run) from the profiler outputs kept in tests/data/profile/ (a stand-in
`ncu` / `rocprofv3` on PATH hands the kept CSV over as the real tool would write it). Without a profiler the prompts
say "no profile" and the generation still submits its candidates."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from support.fp8_gemm_script import demo_config_toml, steady_script
from support.scripted_llm_server import PromptKeepingServer

from ksci.evaluate.results import Status
from ksci.lineage.store import Candidate, LineageStore, candidate_id_of, empty_frame
from ksci.llm.ask import ask_stage
from ksci.llm.config import load_config
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem, shape_key
from ksci.profile import run
from ksci.profile.digest import digest
from ksci.profile.run import ProfileRequest, profile_library
from ksci.profile.store import record_profile
from ksci.proposers.protocol import GenerationContext, Steps
from ksci.proposers.scientist import ScientistProposer
from ksci.run import RunSpec

DATA = Path(__file__).parent / "data" / "profile"
GPU = "NVIDIA H100 80GB HBM3"


def _population(store: LineageStore) -> pd.DataFrame:
    """The two seeds the steady script's selector picks (mma as Base, naive as Reference), timed per shape."""
    problem = load_problem("fp8_gemm")
    keys = [shape_key(s) for s in problem.benchmarks]
    rows = []
    for template, base_us, registers in (("mma", 100.0, 168), ("naive", 900.0, 40)):
        source = render_kernel(problem.template("cuda", template), {})
        times = {k: base_us * (1 + i / 10) for i, k in enumerate(keys)}
        baselines = {k: {"vendor_us": 80.0 * (1 + i / 8), "reference_us": 5000.0} for i, k in enumerate(keys)}
        rows.append(
            Candidate(
                run="r", problem="fp8_gemm", generation=0, candidate_id=candidate_id_of(source), proposer="seed",
                template=template, source_path=store.put_source(source, ".cu"), target="cuda", status="ok",
                geomean_us=base_us, hypothesis="seed", gpu=GPU, registers=registers, spill_bytes=0,
                shared_bytes=49152, scratch_bytes=0, shape_times_json=json.dumps(times),
                shape_baselines_json=json.dumps(baselines),
            )
        )  # fmt: skip
    return pd.concat([empty_frame(), pd.DataFrame([r.__dict__ for r in rows])], ignore_index=True)


def _stand_in_profiler(folder: Path, tool: str, sample: Path) -> None:
    """A stand-in `ncu` (writes the kept CSV to its --log-file) or `rocprofv3` (puts it where its input file's
    output_directory says, in pass_1/), so the real command, run and parse path is taken."""
    if tool == "ncu":
        body = f'while [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp "{sample}" "$2"; shift; done'
    else:
        body = f'out=$(dirname "$2")/pass_1; mkdir -p "$out"; cp "{sample}" "$out/7_counter_collection.csv"'
    path = folder / tool
    path.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && echo "Version 2025.1.1.0 (build 0) (stand-in)" && exit 0\n{body}\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _generation(tmp_path: Path, target: str):
    """One LLM generation; the profile step profiles the Base with the target's profiler. Returns the server and
    what was proposed."""
    store = LineageStore(tmp_path / "store")
    spec = RunSpec(problem="fp8_gemm", run="r", store_root=str(tmp_path / "store"), children=3, proposer="llm")
    context = GenerationContext(spec, 1, _population(store))

    def profile(source: str, candidate_id: str) -> str:
        shape = dict(load_problem("fp8_gemm").benchmarks[-1])
        return digest(profile_library(ProfileRequest("fp8_gemm", "/base.so", shape, target)), 3.35)

    def submit(source, meta):
        return SimpleNamespace(status=Status.OK, message="ok", compile=None, checks=[], harness_log="")

    with PromptKeepingServer(steady_script()) as server:
        config = load_config(_toml(tmp_path, server.base_url), env={})

        def ask(config, request, ledger):
            answer = ask_stage(request, config.stage(request.stage), ledger, None, config.budget)
            return SimpleNamespace(result=lambda: answer)

        steps = Steps(submit=submit, wait=lambda chains: None, verdict=lambda c: c, ask=ask, profile=profile)
        proposed = ScientistProposer(config, seeds=None).propose(context, steps)
    return server, proposed


def _toml(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "ksci.toml"
    path.write_text(demo_config_toml(base_url, timeout_s=5.0, retry_delay_s=0.1))
    return path


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv("KSCI_LLM_API_KEY", "sk-test-SECRET123")


@pytest.mark.parametrize(
    ("target", "sample", "expected"),
    [
        ("cuda", "ncu_raw_h200_wgmma_kmajor.csv", ["tensor pipe busy: 72.1%", "barrier 1.72 (36%)"]),  # recorded
        ("cuda", "ncu_raw_handwritten_h100.csv", ["tensor pipe busy: 62.0%", "dispatch_stall 1.48 (41%)"]),
        ("rocm", "rocprofv3_counter_collection_handwritten_mi300x.csv", ["MFMA busy: 58.2%", "VALU busy: 21.5%"]),
    ],
)
def test_designer_and_writer_prompts_hold_standing_resources_and_digest(
    tmp_path, monkeypatch, target, sample, expected
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in_profiler(bin_dir, run.TOOL_OF_TARGET[target], DATA / sample)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    server, proposed = _generation(tmp_path, target)

    assert len(proposed.chains) == 3 and proposed.failure is None
    for stage in ("designer", "writer"):
        prompt = server.prompt_of(stage)
        assert "# What the hardware says about the Base" in prompt
        assert "Per-shape standing on NVIDIA H100 80GB HBM3" in prompt
        assert "the shapes where the Base loses most to the vendor first" in prompt
        assert "x slower" in prompt and "SOL reached" in prompt
        assert "Compiler resource report" in prompt
        base_line = next(line for line in prompt.splitlines() if line.startswith("Base "))
        reference_line = next(line for line in prompt.splitlines() if line.startswith("Reference "))
        assert " 168 " in base_line and " 40 " in reference_line and "48.0 KiB" in base_line
        assert "roofline class:" in prompt
        assert "How to read the digest" in prompt  # knowledge/profile/<target>.md
        for text in expected:
            assert text in prompt, (stage, text)


def test_no_profiler_leaves_no_profile_in_the_prompts_and_the_generation_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "PLACES", {"ncu": (), "rocprofv3": ()})
    monkeypatch.setenv("PATH", str(Path(os.__file__).parent.parent.parent / "bin"))  # python's own, no ncu
    assert run.find_profiler("cuda") is None
    server, proposed = _generation(tmp_path, "cuda")
    assert len(proposed.chains) == 3 and proposed.failure is None
    for stage in ("designer", "writer"):
        prompt = server.prompt_of(stage)
        assert (
            "Profile digest of the Base (one representative shape):\nno profile: ncu is not installed on this host"
            in prompt
        )
        assert "Per-shape standing on" in prompt  # the standing needs no profiler


def test_the_findings_stage_is_shown_the_digest_its_generation_recorded(tmp_path, monkeypatch):
    """The Base's profile recorded for a generation (as tasks/profile.py records it) reaches that generation's
    findings prompt, from the raw page recorded on the H200; a generation with no profile recorded gets none."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in_profiler(bin_dir, "ncu", DATA / "ncu_raw_h200_wgmma_kmajor.csv")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    store = LineageStore(tmp_path / "store")
    spec = RunSpec(problem="fp8_gemm", run="r", store_root=str(tmp_path / "store"), children=3, proposer="llm")
    population = _population(store)
    base_id = population["candidate_id"].iloc[0]
    result = profile_library(
        ProfileRequest("fp8_gemm", "/base.so", dict(load_problem("fp8_gemm").benchmarks[-1]), "cuda")
    )
    record_profile(spec.store_root, "r", 1, base_id, "base", result, digest(result, 4.8))
    rows = [{"candidate_id": "child1", "parent_id": base_id, "status": "ok", "geomean_us": 90.0, "hypothesis": "h"}]
    with PromptKeepingServer(steady_script()) as server:
        config = load_config(_toml(tmp_path, server.base_url), env={})

        def ask(config, request, ledger):
            answer = ask_stage(request, config.stage(request.stage), ledger, None, config.budget)
            return SimpleNamespace(result=lambda: answer)

        steps = Steps(submit=None, wait=None, verdict=None, ask=ask, profile=None)
        proposer = ScientistProposer(config, seeds=None)
        proposer.conclude(GenerationContext(spec, 1, population), rows, steps)
        proposer.conclude(GenerationContext(spec, 2, population), rows, steps)
    with_profile, without = [p for p in server.prompts if "[ksci stage: findings]" in p]
    assert f"Profile digest of the Base {base_id}, the kernel these candidates changed" in with_profile
    assert "tensor pipe busy: 72.1%" in with_profile and "barrier 1.72 (36%)" in with_profile
    assert "may cite it" in with_profile  # the system prompt says what the digest is for
    assert "Profile digest" not in without and "tensor pipe busy" not in without
