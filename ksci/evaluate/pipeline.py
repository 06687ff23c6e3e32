"""Evaluate one kernel source: prepare (hipify), compile, then verify and time it in an isolated child.

Candidate failures come back as a Verdict; problems of the environment (no compiler, no GPU) raise.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ksci import PROJECT_ROOT, __version__
from ksci.evaluate.compile import compile_source
from ksci.evaluate.hipify import hipify_source, looks_like_cuda
from ksci.evaluate.isolate import Child, ChildOutcome
from ksci.evaluate.libcheck import check_library
from ksci.evaluate.protocol import CLOCK_TOLERANCE, timing_doubts, validate_message
from ksci.evaluate.results import CheckResult, CompileResult, ShapeTiming, Status, Timing, Verdict, geomean
from ksci.evaluate.screen import screen_source
from ksci.evaluate.toolchain import default_arch, find_toolchain
from ksci.problem.roofline import peaks_for, speed_of_light_us
from ksci.problem.spec import Problem, has_entry_point, problem_dirs, shape_key

DEFAULT_CACHE_DIR = Path(os.environ.get("KSCI_COMPILE_CACHE", PROJECT_ROOT / "data" / "cache" / "compile"))


class EnvironmentProblem(RuntimeError):
    """Not the candidate's fault: no GPU, or a harness that cannot start. Retry elsewhere or later."""


@dataclass(frozen=True)
class EvaluationOptions:
    target: str = "cuda"
    arch: str | None = None
    compile_only: bool = False
    phases: tuple[str, ...] = ("verify", "benchmark")
    time_baselines: bool = True
    timeout_s: float = 900.0
    cache_dir: Path = DEFAULT_CACHE_DIR
    policy: dict = field(default_factory=dict)  # overrides of ksci.evaluate.harness.timing.TimingPolicy
    device: str | None = None  # run on this GPU only (index among the GPUs this process may use)
    tests: tuple[dict, ...] | None = None  # subsets of the problem's shapes, e.g. for quick checks
    benchmarks: tuple[dict, ...] | None = None


def evaluate_source(problem: Problem, source: str, options: EvaluationOptions) -> Verdict:
    prepared = prepare(problem, source, options.target)
    note = prepared.note
    compiled = compile_candidate(prepared.source, options) if prepared.ok else unprepared_compile(prepared, options)
    verdict = Verdict(Status.COMPILED, problem.name, options.target, message=note, compile=compiled)
    verdict.fingerprint = host_fingerprint(compiled)
    if not compiled.ok:
        return failed_compile_verdict(problem.name, options.target, compiled, verdict)
    if options.compile_only:
        return verdict
    result = run_phases(problem, compiled, options)
    result.message = result.message or note  # e.g. "converted from CUDA with hipify-perl"
    return result


def run_phases(
    problem: Problem, compiled: CompileResult, options: EvaluationOptions, harness: Harness | None = None
) -> Verdict:
    """Verify and/or time a compiled kernel (options.phases) in an isolated child; the verdict says how it went.

    `harness`: that child, already started for this library and these options (Harness.start), to run on GPU
    options.device; without it, one is started now."""
    verdict = Verdict(Status.COMPILED, problem.name, options.target, compile=compiled)
    verdict.fingerprint = host_fingerprint(compiled)
    started = time.time()
    outcome = harness.run(options.device) if harness else run_harness(problem, compiled.library, options)
    # When and where the GPU was busy with this candidate: lets a run prove no two candidates shared a GPU.
    verdict.fingerprint["gpu_window"] = {
        "phases": list(options.phases),
        "start": started,
        "end": time.time(),
        "device": options.device,
        # Seconds from the go-ahead to the harness's "started" report (the CUDA/HIP context; Python and torch too
        # when the child was not started ahead) and to "loaded" (the candidate's library): the share of the
        # window that is start-up, not the candidate's work.
        **{
            f"{event}_s": round(outcome.first_s[event], 3)
            for event in ("started", "loaded")
            if event in outcome.first_s
        },
    }
    return classify(problem, outcome, verdict, expected_reports(problem, options))


def expected_reports(problem: Problem, options: EvaluationOptions) -> dict:
    """The least an honest run of these phases reports (see Session.run in ksci.evaluate.harness.child).

    Verify: one check per test input set. Benchmark: per shape, the warm-up set and at least two timed outputs (two
    batches, at least one sampled in each; how many more depends on the batches), one timing; then every test
    input set again on new seeds. Each timing also says how many timed outputs it checked, which
    ksci/evaluate/protocol.py holds against the number of timed calls.
    """
    tests = len(options.tests or problem.tests) * problem.trials
    shapes = len(options.benchmarks or problem.benchmarks) if "benchmark" in options.phases else 0
    checks = (tests if "verify" in options.phases else 0) + ((3 * shapes + tests) if shapes else 0)
    return {"checks": checks, "timings": shapes}


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
    """Check the entry point; hipify CUDA code bound for ROCm, naming the converter and what it left."""
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


def compile_candidate(source: str, options: EvaluationOptions) -> CompileResult:
    """Screen the source (ksci.evaluate.screen), compile it, then inspect the library (ksci.evaluate.libcheck).

    A source the screen rejects is never handed to the compiler; a library that imports or runs at load time
    anything outside the allowlist is rejected before any harness loads it."""
    screened = screen_source(source)
    if not screened.ok:
        return _not_compiled(options, screened.message, rejected=screened.message)
    toolchain = find_toolchain(options.target)
    arch = options.arch or default_arch(options.target)
    compiled = compile_source(source, toolchain, arch, Path(options.cache_dir))
    if compiled.ok and compiled.library:
        inspected = check_library(compiled.library, options.target)
        if not inspected.ok:
            compiled.ok, compiled.library, compiled.rejected = False, None, inspected.message
            compiled.log = f"{compiled.log}\n{inspected.message}".strip()
    return compiled


def failed_compile_verdict(
    problem: str, target: str, compiled: CompileResult, verdict: Verdict | None = None
) -> Verdict:
    """The verdict of a candidate that never got a library: rejected by the screen, or a compile error."""
    verdict = verdict or Verdict(Status.COMPILE_ERROR, problem, target, compile=compiled)
    if compiled.rejected:
        verdict.status, verdict.message = Status.REJECTED, compiled.rejected
    else:
        verdict.status, verdict.message = Status.COMPILE_ERROR, first_error(compiled.log)
    return verdict


def gpu_visible(target: str) -> bool:
    if target == "rocm":
        return os.path.exists("/dev/kfd")
    return _nvidia_gpu_count() > 0


def _nvidia_gpu_count() -> int:
    """GPUs that `nvidia-smi -L` lists (0 without the tool or a driver)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def measure_baselines(problem: Problem, options: EvaluationOptions) -> Verdict:
    """Time the reference and the vendor library alone (no candidate), in the same isolated harness."""
    verdict = Verdict(Status.OK, problem.name, options.target, fingerprint=host_fingerprint(None))
    outcome = run_harness(problem, None, options)
    started, result = outcome.last("started"), outcome.last("result")
    if started is None or result is None:
        raise EnvironmentProblem(f"the baseline run failed (exit {outcome.returncode}):\n{outcome.output[-2000:]}")
    verdict.fingerprint.update(started["fingerprint"])
    gpu = verdict.fingerprint.get("gpu", "")
    verdict.timings = [_timing(m, problem, gpu) for m in outcome.events("baseline")]
    _summarise_timings(verdict)
    notes = sorted({m["vendor_error"] for m in outcome.events("baseline") if m.get("vendor_error")})
    verdict.message = "; ".join(notes)
    return verdict


def run_harness(problem: Problem, library: str | None, options: EvaluationOptions) -> ChildOutcome:
    with Harness(problem, library, options) as harness:
        return harness.run(options.device)


class Harness:
    """The isolated harness child of one run, which can be started before its GPU is free.

    `start` gets it going (Python, torch and the problem's reference load meanwhile); `run(device)` hands it its GPU
    and the candidate's library and waits for its outcome, the timeout counting from there. A GPU task starts it
    while it waits for a GPU (ksci.devices.any_free_gpu), so that a candidate's start-up overlaps the previous
    candidate's work on that GPU. With `spares`, `start` takes a child that was started before (SPARES) and keeps
    that many more starting for the next candidates of the same problem and options. Leaving the `with` block
    kills the child, run or not, and deletes its scratch folder."""

    def __init__(self, problem: Problem, library: str | None, options: EvaluationOptions, spares: int = 0) -> None:
        self.problem, self.library, self.options, self.spares = problem, library, options, spares
        self._started: _Started | None = None
        self._library_copy: str | None = None

    def start(self) -> None:
        """Have a child ready now (once); it waits for `run`."""
        if self._started is not None:
            return
        if not gpu_visible(self.options.target):
            raise EnvironmentProblem(
                f"no {self.options.target} GPU is visible on this machine: nothing can be run or timed"
            )
        self._started = SPARES.take(harness_request(self.problem, self.options), self.spares)
        if self.library is not None:  # the child loads its own copy: it is given no path into data/
            self._library_copy = str(shutil.copy(self.library, self._started.scratch / "kernel.so"))

    def run(self, device: str | None) -> ChildOutcome:
        """Give the child GPU `device` (an index among this process's GPUs; None: every one it may see) and the
        candidate's library, and wait."""
        self.start()
        go: dict = {"env": pin_device(device, self.options.target)} if device is not None else {}
        if self.library is not None:
            go["library"] = self._library_copy
        return self._started.child.run(self.options.timeout_s, go)

    def close(self) -> None:
        if self._started is not None:
            self._started.close()
        self._started = None

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class _Started:
    """A harness child waiting for its go-ahead, and the scratch folder it runs in (its HOME and TMPDIR)."""

    child: Child
    folder: tempfile.TemporaryDirectory

    @property
    def scratch(self) -> Path:
        return Path(self.folder.name)

    def close(self) -> None:
        self.child.close()
        self.folder.cleanup()


def harness_request(problem: Problem, options: EvaluationOptions) -> dict:
    """What a harness child is started with: everything but the candidate's library, which comes with the go-ahead."""
    return {
        "problem": problem.name,
        "target": options.target,
        "phases": list(options.phases),
        "time_baselines": options.time_baselines,
        "policy": options.policy,
        "tests": list(options.tests or ()),
        "benchmarks": list(options.benchmarks or ()),
        "timeout_s": options.timeout_s,
    }


def _start_child(request: dict) -> _Started:
    folder = tempfile.TemporaryDirectory(prefix="ksci-child-")
    scratch = Path(folder.name)
    path = scratch / "request.json"
    path.write_text(json.dumps(request))
    argv = [sys.executable, "-m", "ksci.evaluate.harness.child", str(path)]
    try:
        return _Started(Child(argv, env=child_environment(scratch), cwd=scratch), folder)
    except BaseException:
        folder.cleanup()
        raise


class SpareHarnesses:
    """Harness children started before any candidate asks for one, by request (problem and evaluation options).

    Every child still runs one candidate only; a spare is one whose start (Python, torch, the reference: 3.5 s,
    and up to 7 s on a host busy compiling) is over before a candidate needs it, where a child started when the
    candidate is compiled and near the front of the GPU queue can still be starting when its GPU frees up. A spare
    waits for its go-ahead on stdin and exits once that closes, so spares die with this process whatever ends it;
    `close` ends them sooner (the evolve flow does, when it finishes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, list[_Started]] = {}

    def take(self, request: dict, spares: int) -> _Started:
        """A started child for `request` (a spare if there is one), leaving `spares` more starting or ready."""
        with self._lock:
            ready = self._ready.setdefault(_key(request), [])
            taken = ready.pop(0) if ready else None
        self.fill(request, spares)
        return taken if taken is not None else _start_child(request)

    def fill(self, request: dict, spares: int) -> None:
        """Start spares for `request` until `spares` of them are starting or ready."""
        with self._lock:
            ready = self._ready.setdefault(_key(request), [])
            while len(ready) < spares:
                ready.append(_start_child(request))

    def ready(self, request: dict) -> int:
        """How many spares for `request` are starting or waiting."""
        with self._lock:
            return len(self._ready.get(_key(request), []))

    def close(self) -> int:
        """End every spare; returns how many there were."""
        with self._lock:
            every = [started for ready in self._ready.values() for started in ready]
            self._ready.clear()
        for started in every:
            started.close()
        return len(every)


def _key(request: dict) -> str:
    return json.dumps(request, sort_keys=True)


SPARES = SpareHarnesses()


def child_environment(scratch: Path) -> dict[str, str]:
    """The harness child's whole environment, from an allowlist: no API keys, no Prefect settings, no proxies.

    Kept: the search paths, the GPU runtime's device selection and settings, the locale; HOME and TMPDIR point
    into the scratch folder, so caches the runtime writes (e.g. ~/.nv) land there and vanish with it.
    """
    env = {name: value for name, value in os.environ.items() if _allowed(name)}
    env.update(
        KSCI_KERNELS_DIR=os.pathsep.join(str(d) for d in problem_dirs()),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        HOME=str(scratch),
        TMPDIR=str(scratch),
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    return env  # the GPU it may use comes with the go-ahead (Harness.run), once its slot is taken


CHILD_ENV_NAMES = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}
CHILD_ENV_PREFIXES = ("CUDA_", "HIP_", "ROCR_", "HSA_", "NVIDIA_", "ROCM_", "HCC_", "AMD_")
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def _allowed(name: str) -> bool:
    if any(hint in name.upper() for hint in _SECRET_HINTS):
        return False  # never, whatever its prefix (e.g. a CUDA_..._TOKEN someone invented)
    return name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES)


def _inherited_devices(target: str) -> tuple[str, list[str]]:
    """The visible-devices variable of the target and the GPUs it already restricts this process to."""
    variable = "HIP_VISIBLE_DEVICES" if target == "rocm" else "CUDA_VISIBLE_DEVICES"
    return variable, [d for d in os.environ.get(variable, "").split(",") if d]


def pin_device(device: str, target: str) -> dict[str, str]:
    """Environment that shows the child one GPU: `device` indexes the GPUs this process may already see."""
    variable, inherited = _inherited_devices(target)
    index = int(device)
    if inherited and index >= len(inherited):
        raise EnvironmentProblem(f"GPU {device} is not among the {len(inherited)} in {variable}={','.join(inherited)}")
    return {variable: inherited[index] if inherited else device}


def visible_gpus(target: str) -> list[str]:
    """Indices of the GPUs this process may use (0..N-1), or [] without any."""
    if not gpu_visible(target):
        return []
    _, inherited = _inherited_devices(target)
    if inherited:
        return [str(i) for i in range(len(inherited))]
    if target == "rocm":
        return ["0"]  # rocm-smi is not required; pass --gpus to use more
    return [str(i) for i in range(_nvidia_gpu_count())]


def classify(problem: Problem, outcome: ChildOutcome, verdict: Verdict, expect: dict | None = None) -> Verdict:
    """Turn what the child reported (or failed to report) into a verdict.

    `expect` ({"checks": n, "timings": n}): the least an ok run reports; a result that claims ok with less is not.
    """
    invalid = _drop_invalid(outcome)
    started = outcome.last("started")
    verdict.fingerprint.update(started["fingerprint"] if started else {})
    if (sandbox := outcome.last("sandbox")) is not None:
        verdict.fingerprint["sandbox"] = {k: v for k, v in sandbox.items() if k != "event"}
    verdict.checks = [_check(m) for m in outcome.events("check")]
    verdict.harness_log = outcome.output
    result = outcome.last("result")
    if outcome.timed_out:
        return _fail(verdict, Status.TIMEOUT, f"killed after {outcome.wall_s:.0f} s (hard timeout)")
    if (err := outcome.last("load_error")) is not None:
        return _fail(verdict, Status.LOAD_ERROR, err["message"])
    if started is None:
        raise EnvironmentProblem(f"the harness did not start (exit {outcome.returncode}):\n{outcome.output[-2000:]}")
    if result is not None and result["status"] == "wrong":
        return _fail(verdict, Status.WRONG, result.get("message", ""))
    if result is None or result["status"] != "ok":
        err = outcome.last("runtime_error") or outcome.last("harness_error")
        why = err["message"] if err else _death(outcome.returncode)
        return _fail(verdict, Status.RUNTIME_ERROR, why)
    verdict.status = Status.OK
    verdict.timings = [_timing(m, problem, verdict.fingerprint.get("gpu", "")) for m in outcome.events("timing")]
    _summarise_timings(verdict)
    doubts = invalid + _report_doubts(outcome, verdict) + _missing(outcome, expect or {})
    if doubts and verdict.status == Status.OK:
        return _fail(verdict, Status.SUSPICIOUS, "; ".join(doubts))
    return verdict


def _drop_invalid(outcome: ChildOutcome) -> list[str]:
    """Remove the messages that fail their schema; why, when there were any (such a run is never ok)."""
    timed = len(outcome.arrivals) == len(outcome.messages)  # outcomes written by hand (tests) may have no arrivals
    valid, arrivals, reasons = [], [], []
    for i, message in enumerate(outcome.messages):
        problem = validate_message(message)
        if problem is None:
            valid.append(message)
            arrivals.extend([outcome.arrivals[i]] if timed else [])
        else:
            reasons.append(problem)
    outcome.messages, outcome.arrivals = valid, arrivals
    bad = outcome.bad_messages + len(reasons)
    if not bad:
        return []
    shown = f": {reasons[0]}" if reasons else ""
    return [f"the harness's report had {bad} malformed message(s){shown}"]


def _missing(outcome: ChildOutcome, expect: dict) -> list[str]:
    checks, timings = len(outcome.events("check")), len(outcome.events("timing"))
    if checks < expect.get("checks", 0) or timings < expect.get("timings", 0):
        return [
            f"the result says ok after {checks} checks and {timings} timings, "
            f"fewer than the run must make ({expect.get('checks', 0)} and {expect.get('timings', 0)})"
        ]
    return []


def _report_doubts(outcome: ChildOutcome, verdict: Verdict) -> list[str]:
    """A result reported ok must come with what an ok run reports, and with timings the clocks agree with."""
    doubts = []
    if any(not c.ok for c in verdict.checks):
        doubts.append("a failed check was reported, yet the result says ok")
    timings = outcome.events("timing")
    parent = _parent_clock_us(outcome)
    for message in timings:
        for doubt in timing_doubts(message, parent.get(id(message))):
            doubts.append(f"{message.get('key') or message['shape']}: {doubt}")
    total_host_s = sum(m["integrity"]["shape_host_us"] for m in timings) / 1e6
    if outcome.wall_s and total_host_s > outcome.wall_s * CLOCK_TOLERANCE:
        doubts.append(
            f"the child's shapes add up to {total_host_s:.2f} s, longer than the child ran ({outcome.wall_s:.2f} s)"
        )
    missing = [m.get("key") for m in timings if id(m) not in parent]
    if outcome.arrivals and missing:
        doubts.append(f"no `shape` message came before the timing of {', '.join(map(str, missing))}")
    return doubts


def _parent_clock_us(outcome: ChildOutcome) -> dict[int, float]:
    """For each timing message (by id), the parent's clock from its shape's `shape` message to it, in us."""
    if len(outcome.arrivals) != len(outcome.messages):
        return {}
    started: dict[str, float] = {}
    elapsed = {}
    for message, arrival in zip(outcome.messages, outcome.arrivals, strict=True):
        if message["event"] == "shape":
            started[message["key"]] = arrival
        elif message["event"] == "timing" and message.get("key") in started:
            elapsed[id(message)] = (arrival - started.pop(message["key"])) * 1e6
    return elapsed


def _fail(verdict: Verdict, status: Status, message: str) -> Verdict:
    verdict.status, verdict.message = status, message
    return verdict


def _death(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"the harness process was killed by signal {-returncode}"
    return f"the harness process exited with code {returncode} before reporting a result"


def _check(message: dict) -> CheckResult:
    fields = ("ok", "report", "mismatches", "total", "max_abs_error", "nan_or_inf")
    return CheckResult(shape=message["shape"], seed=message["seed"], **{k: message[k] for k in fields})


def _timing(message: dict, problem: Problem, gpu: str) -> ShapeTiming:
    def t(key: str) -> Timing | None:
        return Timing(**message[key]) if message.get(key) else None

    shape = message["shape"]
    peaks = peaks_for(gpu)
    sol = None
    if peaks is not None:
        sol = speed_of_light_us(message["flops"], message["bytes"], peaks, problem.roofline_compute)
    vendor = t("vendor") if message.get("vendor_ok", True) else None
    return ShapeTiming(shape=shape, kernel=t("kernel"), reference=t("reference"), vendor=vendor, speed_of_light_us=sol)


def _summarise_timings(verdict: Verdict) -> None:
    timings = verdict.timings
    verdict.geomean_us = geomean([s.kernel.median_us if s.kernel else None for s in timings])
    # A geomean over only some of the shapes would mislead, so a baseline missing anywhere gives None.
    verdict.reference_geomean_us = geomean([s.reference.median_us if s.reference else None for s in timings])
    verdict.vendor_geomean_us = geomean([s.vendor.median_us if s.vendor else None for s in timings])
    verdict.speed_of_light_geomean_us = geomean([s.speed_of_light_us for s in timings])
    too_fast = [s for s in timings if s.kernel and s.speed_of_light_us and s.kernel.median_us < s.speed_of_light_us]
    if too_fast:
        names = ", ".join(
            f"{shape_key(s.shape)} ({s.kernel.median_us:.2f} < {s.speed_of_light_us:.2f} us)" for s in too_fast
        )
        verdict.status = Status.SUSPICIOUS
        verdict.message = f"faster than the speed of light on {names}: the measurement cannot be trusted"


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
