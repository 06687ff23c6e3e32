"""The stage functions of an evaluation on this host's toolchains and GPUs, each a value in and a value out:
prepare (size limit, entry point, hipify), compile (screen, sandboxed compiler, library check), run the phases in
the harness child (verify and/or time, then classify), and the baselines alone.

ksci/evaluate/stage_order.py orders them (through a Backend, ksci/backends/); ksci/backends/real.py is the backend
built from them. Candidate failures come back as values (a CompileResult not ok, a Verdict); problems of the
environment (no compiler, no GPU) raise.
"""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ksci import __version__
from ksci.evaluate.judge.classify import classify, expected_reports, shape_timing, summarise_timings
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.results import CompileResult, Status, Verdict
from ksci.evaluate.run.harness_process import Harness, run_harness
from ksci.evaluate.sandbox.compiler import require_sandbox
from ksci.evaluate.screen.library import check_library
from ksci.evaluate.screen.source import screen_source, source_too_large
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.hipify import hipify_source, looks_like_cuda
from ksci.evaluate.toolchain.toolchains import default_arch, find_toolchain
from ksci.problem.contract import draw_held_out
from ksci.problem.spec import Problem, has_entry_point


@dataclass(frozen=True)
class PreparedSource:
    """A candidate's source as the compiler gets it: converted to HIP where CUDA is bound for ROCm. Not ok: `note`
    says why it cannot be compiled (no entry point, a conversion that failed), `source` is as it came, and `log`
    holds the converter's whole output."""

    source: str
    ok: bool
    note: str = ""
    log: str = ""


def prepare(problem: Problem, source: str, target: str) -> PreparedSource:
    """Check the entry point; hipify CUDA code bound for ROCm, naming the converter and what it left. A source over
    the screen's size limit is passed on untouched, for the screen to refuse: nothing reads it before that."""
    if source_too_large(source):
        return PreparedSource(source, True)
    if not has_entry_point(source, problem.entry_name):
        return PreparedSource(
            source, False, f'the source does not define the entry point extern "C" {problem.entry_name}(...)'
        )
    if target == "rocm" and looks_like_cuda(source):
        converted = hipify_source(source)
        if not converted.ok:
            last = (converted.log.strip().splitlines() or ["no output"])[-1]
            return PreparedSource(
                source, False, f"the source is CUDA and could not be converted to HIP: {last}", converted.log
            )
        left = f"; left unconverted: {', '.join(converted.unconverted)}" if converted.unconverted else ""
        return PreparedSource(converted.source, True, f"converted from CUDA with {converted.tool}{left}", converted.log)
    return PreparedSource(source, True)


def unprepared_compile(prepared: PreparedSource, options: EvaluationOptions) -> CompileResult:
    """The compile result of a source that never reached the compiler: the note first, then the converter's log."""
    return _not_compiled(options, f"error: {prepared.note}\n{prepared.log}".strip())


def _not_compiled(options: EvaluationOptions, log: str, rejected: str = "") -> CompileResult:
    """A CompileResult for a source that no compiler saw."""
    return CompileResult(
        ok=False, target=options.target, arch=options.arch or "", toolchain="", command=[], log=log, rejected=rejected
    )


def screen_refusal(source: str, options: EvaluationOptions) -> CompileResult | None:
    """The compile result of a source the static screen refuses (status rejected), or None: the first step of
    every backend's compile, the simulator's too, so that a run with --simulate refuses what a real one does."""
    screened = screen_source(source)
    return None if screened.ok else _not_compiled(options, screened.message, rejected=screened.message)


def compile_candidate(source: str, options: EvaluationOptions) -> CompileResult:
    """Screen the source (ksci.evaluate.screen.source), compile it in the sandbox (ksci.evaluate.sandbox.compiler), then inspect
    the library (ksci.evaluate.screen.library).

    A source the screen rejects is never handed to the compiler; where no sandbox can be made (and the user did not
    opt out) no source is, and EnvironmentProblem says why in one line; a library that imports or runs at load time
    anything outside the allowlist is rejected before any harness loads it."""
    if (refused := screen_refusal(source, options)) is not None:
        return refused
    toolchain = find_toolchain(options.target)
    require_sandbox()
    arch = options.arch or default_arch(options.target)
    compiled = compile_source(source, toolchain, arch, Path(options.cache_dir))
    if compiled.ok and compiled.library:
        inspected = check_library(compiled.library, options.target)
        if not inspected.ok:
            compiled.ok, compiled.library, compiled.rejected = False, None, inspected.message
            compiled.log = f"{compiled.log}\n{inspected.message}".strip()
    return compiled


def failed_compile_verdict(problem: str, target: str, compiled: CompileResult) -> Verdict:
    """The verdict of a candidate that never got a library: rejected by the screen, or a compile error. Its
    fingerprint is the host's and the compiler's, on every path (the CLI's, the flow's, rebench's)."""
    verdict = Verdict(Status.COMPILE_ERROR, problem, target, compile=compiled, fingerprint=host_fingerprint(compiled))
    if compiled.rejected:
        verdict.status, verdict.message = Status.REJECTED, compiled.rejected
    else:
        verdict.message = first_error(compiled.log)
    return verdict


def run_phases(
    problem: Problem, compiled: CompileResult, options: EvaluationOptions, harness: Harness | None = None
) -> Verdict:
    """Verify and/or time a compiled kernel (options.phases) in an isolated child; the verdict says how it went.

    `harness`: that child, already started for this library and these options (Harness.start), to run on GPU
    options.device; without it, one is started now. Verification also checks options.held_out shapes drawn now
    from the problem's shape contract (ksci/problem/contract.py); the verdict's fingerprint records them."""
    verdict = Verdict(Status.COMPILED, problem.name, options.target, compile=compiled)
    verdict.fingerprint = host_fingerprint(compiled)
    held_out = draw_held_out(problem, options.held_out) if "verify" in options.phases and options.held_out else []
    started = time.time()
    if harness is not None:
        outcome = harness.run(options.device, held_out)
    else:
        outcome = run_harness(problem, compiled.library, options, held_out)
    # When and where the GPU was busy with this candidate: lets a run prove no two candidates shared a GPU.
    verdict.fingerprint["gpu_window"] = _gpu_window(list(options.phases), started, options.device, outcome)
    if held_out:
        verdict.fingerprint["held_out"] = held_out
    return classify(problem, outcome, verdict, expected_reports(problem, options, len(held_out)))


def _gpu_window(phases: list[str], started: float, device: str | None, outcome) -> dict:
    """When and on which GPU a harness run held its GPU, and the seconds from the go-ahead to the harness's
    "started" report (the CUDA/HIP context; Python and torch too when the child was not started ahead), to
    "loaded" (the candidate's library) and to its "result": the shares of the window that are start-up and,
    after the result, the child's exit, not the candidate's work. A run that handed its GPU over at its result
    (ksci.devices.Lease) held it until then; `exited_s` says when its process was gone, the next run on the GPU
    starting meanwhile."""
    events = ("started", "loaded", "result")
    handed = outcome.handed_over_s
    return {
        "phases": phases,
        "start": started,
        "end": time.time() if handed is None else started + handed,
        "device": device,
        **{f"{event}_s": round(outcome.first_s[event], 3) for event in events if event in outcome.first_s},
        **({"exited_s": round(outcome.wall_s, 3)} if handed is not None else {}),
    }


def _why_failed(outcome) -> str:
    """What the child reported of its failure (the reference's or the vendor library's exception, first), else
    the tail of its output."""
    error = outcome.reported_error()
    said = f"{error['event']}: {error.get('message', '')}" if error else ""
    return "\n".join(part for part in (said, outcome.output[-2000:].strip()) if part) or "it reported nothing"


def measure_baselines(problem: Problem, options: EvaluationOptions, harness: Harness | None = None) -> Verdict:
    """Time the reference and the vendor library alone (no candidate), in the same isolated harness.

    `harness`: a child already started with no library (Harness.start), to run on GPU options.device; without it,
    one is started now."""
    verdict = Verdict(Status.OK, problem.name, options.target, fingerprint=host_fingerprint(None))
    began = time.time()
    outcome = harness.run(options.device) if harness else run_harness(problem, None, options)
    verdict.fingerprint["gpu_window"] = _gpu_window(["baselines"], began, options.device, outcome)
    started, result = outcome.last("started"), outcome.last("result")
    if started is None or result is None:
        raise EnvironmentProblem(f"the baseline run failed (exit {outcome.returncode}): {_why_failed(outcome)}")
    verdict.fingerprint.update(started["fingerprint"])
    gpu = verdict.fingerprint.get("gpu", "")
    verdict.timings = [shape_timing(m, problem, gpu) for m in outcome.events("baseline")]
    summarise_timings(verdict)
    notes = sorted({m["vendor_error"] for m in outcome.events("baseline") if m.get("vendor_error")})
    verdict.message = "; ".join(notes)
    return verdict


def first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return (log.strip().splitlines() or ["compilation failed"])[-1][:300]


def host_fingerprint(compiled: CompileResult | None) -> dict:
    return {
        "host": platform.node(),
        "ksci": __version__,
        "python": platform.python_version(),
        "toolchain": compiled.toolchain if compiled else None,
        "arch": compiled.arch if compiled else None,
        "driver": _driver_version(),
    }


@functools.cache
def _driver_version() -> str | None:
    """Asked once per process: every verdict carries it, and nvidia-smi costs tens of milliseconds a call."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None
