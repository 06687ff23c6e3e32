"""The sandbox holds when its user is root (issue 51): a read-only folder cannot be made writable from inside, by a
compile step or by a kernel's host code, whatever spelling its system calls take.

Each layer (locked mounts, no capabilities, the syscall filter: ksci/evaluate/sandbox/enter.py, confine.py) is
tried alone and all together, in both of the sandbox's modes where this host allows them (a user namespace; as
root, none). The folder made read-only is a throwaway one of the test's, never /usr. The raw-syscall attacks are
tests/data/sandbox/hostile.c (`.byte 0x0f, 0x05`), run in the compiler's sandbox as a program and in the harness
child's (confined_child + confine_self, the child's own code path) as a shared library, whose verdict comes from
ksci.evaluate.judge.classify as a real candidate's does.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ksci import PROJECT_ROOT
from ksci.evaluate.judge.classify import classify
from ksci.evaluate.results import Status, Verdict
from ksci.evaluate.run.harness_process import child_environment
from ksci.evaluate.run.isolate import run_child
from ksci.evaluate.sandbox import compiler as sandbox
from ksci.evaluate.sandbox import harness as harness_sandbox
from ksci.problem.spec import load_problem

HOSTILE = Path(__file__).parent / "data" / "sandbox" / "hostile.c"
WHAT_EACH_LAYER_SAYS = {"mounts": "locked", "capabilities": "dropped", "syscalls": "filtered"}
SINGLE_LAYERS = [(layer,) for layer in sandbox.LAYERS]
QUICK = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}  # timing policy of the GPU tests (the verdict, not speed)
raw_syscalls = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("gcc") is None, reason="the raw-syscall attacks are x86_64 C (gcc)"
)


@pytest.fixture(params=["user namespace", "root, no user namespace"])
def mode(request, monkeypatch) -> str:
    """Both ways the sandbox is made: in a user namespace (any user), and as root without one (where a host
    refuses user namespaces)."""
    if request.param != "user namespace":
        if os.geteuid() != 0:
            pytest.skip("the sandbox without a user namespace is made by root only")
        status = sandbox.SandboxStatus(True, sandbox.NAMESPACES, unshare=shutil.which("unshare") or "unshare")
        monkeypatch.setattr(sandbox, "sandbox_status", lambda: status)
        monkeypatch.setattr(harness_sandbox, "sandbox_status", lambda: status)
    elif not sandbox.sandbox_status().ok or sandbox.sandbox_status().mode != request.param:
        pytest.skip(f"no sandbox in a user namespace here: {sandbox.sandbox_status().reason}")
    return request.param


@pytest.fixture
def folders(tmp_path) -> tuple[Path, Path]:
    """A folder bound read-only into the sandbox, and the writable work folder."""
    read_only, work = tmp_path / "read-only", tmp_path / "work"
    read_only.mkdir()
    work.mkdir()
    return read_only, work


def _in_sandbox(script: str, read_only: Path, work: Path, layers=sandbox.LAYERS, proc=False) -> tuple[str, dict]:
    """Run `script` with /bin/sh in the compiler's sandbox; its output and what each layer did (KSCI_SANDBOX)."""
    root = sandbox.Root(
        read_only=[*sandbox.toolchain_paths([]), str(read_only)],
        writable=[str(work)],
        cwd=str(work),
        env=sandbox.compiler_environment("cuda"),
        proc=proc,
    )
    argv = sandbox.wrap(["/bin/sh", "-c", f'echo "${sandbox.STATUS_VARIABLE}"; {script}'], root, layers=layers)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    first, _, rest = done.stdout.partition("\n")
    assert done.returncode != 125, done.stderr  # the set-up itself worked
    return rest + done.stderr, json.loads(first)


def _applied(layers: dict, wanted: tuple[str, ...]) -> None:
    """Each wanted layer was applied, or the test skips with what the host said."""
    for layer in wanted:
        if not layers[layer].startswith(WHAT_EACH_LAYER_SAYS[layer]):
            pytest.skip(f"this host cannot apply the {layer} layer: {layers[layer]}")


@pytest.mark.parametrize("layers", [sandbox.LAYERS, *SINGLE_LAYERS], ids=["all", *sandbox.LAYERS])
def test_a_remount_from_inside_writes_nothing(mode, folders, layers):
    read_only, work = folders
    script = (
        f"mount -o remount,rw,bind {read_only}; echo written > {read_only}/after-remount; "
        f"echo written > {read_only}/direct; echo written > {work}/in-work && echo work-written"
    )
    said, applied = _in_sandbox(script, read_only, work, layers=layers)
    _applied(applied, layers)
    assert sorted(p.name for p in read_only.iterdir()) == [], said  # nothing came through
    assert (work / "in-work").read_text() == "written\n" and "work-written" in said  # the work folder still works
    refusals = [line for line in said.splitlines() if "permission denied" in line or "Read-only file system" in line]
    assert any("mount" in line and "permission denied" in line for line in refusals), said  # one line says why
    assert sum("Read-only file system" in line for line in refusals) == 2, said


def test_the_layers_are_all_on_unless_turned_off(mode, folders):
    """What a compile gets by default, and the kernel's own files a fresh /proc would let root write to."""
    read_only, work = folders
    script = "import os; print(all(os.statvfs(p).f_flag & 1 for p in ('/proc/sys', '/proc/sysrq-trigger') if os.path.exists(p)))"
    said, applied = _in_sandbox(f'python3 -c "{script}"', read_only, work, proc=True)
    assert applied["mounts"].startswith("locked") or applied["mounts"].startswith("not locked: no nested")
    assert applied["capabilities"].startswith("dropped"), applied
    assert applied["syscalls"].startswith("filtered") or "libseccomp.so.2 not found" in applied["syscalls"]
    # /proc/sys (and /proc/sysrq-trigger, where there is one) are read-only mounts
    assert applied["proc"] == "read-only" and said.strip() == "True", said


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path]:
    """hostile.c built as a program and as a shared library."""
    folder = tmp_path_factory.mktemp("hostile")
    program, library = folder / "hostile", folder / "hostile.so"
    subprocess.run(["gcc", "-O1", "-o", str(program), str(HOSTILE)], check=True, capture_output=True)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(library), str(HOSTILE)], check=True)
    return program, library


@raw_syscalls
@pytest.mark.parametrize("layers", [sandbox.LAYERS, *SINGLE_LAYERS], ids=["all", *sandbox.LAYERS])
def test_raw_syscalls_in_a_compile_write_nothing(mode, folders, hostile, layers):
    read_only, work = folders
    shutil.copy(hostile[0], work / "hostile")
    said, applied = _in_sandbox(
        f"./hostile remount {read_only} {read_only}/remounted; echo remount $?; "
        f"./hostile write {read_only}/written; echo write $?",
        read_only,
        work,
        layers=layers,
    )
    _applied(applied, layers)
    assert sorted(p.name for p in read_only.iterdir()) == [], said
    # Each attack ends with the errno that stopped it: EPERM (1) from the filter or a locked mount, EROFS (30).
    assert set(said.split()) >= {"remount", "write"} and "remount 0" not in said and "write 0" not in said, said


def _hostile_candidate(scratch: Path, library: Path, call: str) -> list[str]:
    """A stand-in for the harness child that confines itself as the real one does (limits, network, then
    confine_self), loads `library` as Candidate loads a kernel's, and evaluates `call` (`lib.ATTACK(...)`, or
    `honest()`: threads, an AF_UNIX socket pair and a child process)."""
    script = scratch / "candidate.py"
    script.write_text(
        f"""
import ctypes, json, os, sys
from ksci.evaluate.sandbox.harness import confine_self, drop_network, limit_resources
fd = int(sys.argv[sys.argv.index("--report-fd") + 1])
report = os.fdopen(fd, "w", buffering=1)
def send(event, **fields):
    report.write(json.dumps({{"event": event, **fields}}) + "\\n")
send("started", fingerprint={{}})
sandbox = {{"limits": limit_resources(60), "network": drop_network()}}
sandbox.update(confine_self(fd))
send("sandbox", **sandbox)
lib = ctypes.CDLL({str(library)!r}, mode=os.RTLD_NOW | os.RTLD_LOCAL)
def honest():
    import socket, subprocess, threading
    socket.socketpair()
    thread = threading.Thread(target=print)
    thread.start()
    thread.join()
    return subprocess.run(["/bin/true"]).returncode
code = {call}
send("result", status="ok") if code == 0 else send("runtime_error", message=f"entry point returned {{code}}")
"""
    )
    return [sys.executable, str(script)]


ATTACKS = {
    "remount": ("lib.remount_and_write(b'{ro}', b'{ro}/remounted')", "mount"),
    "raw_write": ("lib.raw_write(b'{ro}/written')", "unshare"),  # EROFS, then the way out of the namespaces
    "socket": ("lib.connect_inet({port})", "socket"),
    "ptrace": ("lib.ptrace_parent()", "ptrace"),
}


@raw_syscalls
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_denied_call_in_a_kernels_host_code_fails_the_candidate_naming_it(
    mode, tmp_path, hostile, attack, monkeypatch
):
    """Host code in the harness child's sandbox, after the child confined itself: the call is denied, the verdict
    is not ok and its one line names the call, and nothing was written outside the scratch folder."""
    read_only, scratch = tmp_path / "problems", tmp_path / "scratch"
    read_only.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("KSCI_KERNELS_DIR", f"{PROJECT_ROOT / 'kernels'}{os.pathsep}{read_only}")  # bound read-only
    monkeypatch.delenv(harness_sandbox.OPT_OUT, raising=False)
    library = Path(shutil.copy(hostile[1], scratch / "kernel.so"))
    call, denied = ATTACKS[attack]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        env = {**child_environment(scratch), "PYTHONPATH": str(PROJECT_ROOT)}
        call = call.format(ro=read_only, port=server.getsockname()[1])
        argv = harness_sandbox.confined_child(_hostile_candidate(scratch, library, call), scratch, env)
        outcome = run_child(argv, timeout_s=120, env=env, cwd=scratch)
    layers = outcome.last("sandbox")
    assert layers is not None, outcome.output
    if not layers["syscalls"].startswith("filtered"):
        pytest.skip(f"no syscall filter here: {layers['syscalls']}")
    verdict = classify(load_problem("rmsnorm"), outcome, Verdict(Status.OK, "rmsnorm", "cuda"))
    assert verdict.status == Status.RUNTIME_ERROR, (verdict.message, outcome.output)
    assert verdict.message == f"crashed: denied system call {denied}", outcome.output
    assert list(read_only.iterdir()) == []
    assert layers["capabilities"].startswith("dropped") and layers["network"].startswith("isolated"), layers


@raw_syscalls
def test_honest_host_code_runs_under_the_same_confinement(mode, tmp_path, hostile, monkeypatch):
    """Threads, an AF_UNIX socket pair and a child process are allowed: the confinement denies only what it lists."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.delenv(harness_sandbox.OPT_OUT, raising=False)
    env = {**child_environment(scratch), "PYTHONPATH": str(PROJECT_ROOT)}
    argv = _hostile_candidate(scratch, Path(shutil.copy(hostile[1], scratch / "kernel.so")), "honest()")
    outcome = run_child(harness_sandbox.confined_child(argv, scratch, env), timeout_s=120, env=env, cwd=scratch)
    assert outcome.last("result") == {"event": "result", "status": "ok"}, outcome.output
    assert outcome.last("denied") is None and outcome.returncode == 0


def test_a_compile_as_an_ordinary_user(tmp_path):
    """One real compile through `ksci evaluate --compile-only`, as `nobody`, every layer applied."""
    if shutil.which("nvcc") is None or shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs nvcc, setpriv and root (to become nobody)")
    folder = Path(__import__("tempfile").mkdtemp(prefix="ksci-nobody-", dir="/tmp"))  # no 0700 parent on the way
    try:
        folder.chmod(0o777)
        source = folder / "k.cu"
        source.write_text('#include <cuda_runtime.h>\nextern "C" int rmsnorm(const void* x, const void* weight, '
                          'void* out, int rows, int cols, void* stream) { return 0; }\n')  # fmt: skip
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(PROJECT_ROOT), "TMPDIR": str(folder)}
        env.update(HOME=str(folder), KSCI_COMPILE_CACHE=str(folder / "cache"))
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *_python_for_nobody(env)]
        cli = [*nobody, "-m", "ksci.cli", "evaluate", "--problem", "rmsnorm", "--source", str(source)]
        done = subprocess.run([*cli, "--compile-only"], capture_output=True, text=True, env=env, timeout=600)
        if done.returncode == 3 and "cannot sandbox the compiler" in done.stderr:
            pytest.skip(f"no sandbox for an ordinary user here: {done.stderr.strip()}")
        assert done.returncode == 0 and "compiled" in done.stdout, done.stdout + done.stderr
        status = "import json; from ksci.evaluate.sandbox import compiler; print(json.dumps(compiler.sandbox_status().layers))"
        probe = subprocess.run([*nobody, "-c", status], capture_output=True, text=True, env=env, timeout=120)
        layers = dict(json.loads(probe.stdout))
        assert layers["capabilities"].startswith("dropped") and layers["mounts"].startswith("locked"), layers
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# The CLI starts its own interpreter again (the compile's file-size wrapper): that must run as nobody too.
_RUNS_ITSELF = "import subprocess, sys, ksci.cli; subprocess.run([sys.executable, '-c', 'pass'], check=True)"


def _python_for_nobody(env: dict) -> list[str]:
    """An interpreter `nobody` can run with the project importable: this one, or, where it lies under a folder
    nobody may not enter (a pyenv under a 0700 /root), the system's Python of the same version with this one's
    site-packages on PYTHONPATH (env is updated). Skips when neither imports the CLI."""
    site = sysconfig.get_paths()["purelib"]
    candidates = [(sys.executable, str(PROJECT_ROOT))]
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.access(system, os.X_OK):
        candidates.append((system, os.pathsep.join([str(PROJECT_ROOT), site])))
    why = []
    for python, path in candidates:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", _RUNS_ITSELF]
        probe = subprocess.run(argv, capture_output=True, text=True, env={**env, "PYTHONPATH": path}, timeout=300)
        if probe.returncode == 0:
            env["PYTHONPATH"] = path
            return [python]
        why.append(f"{python}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    pytest.skip("no Python that nobody can run with the project importable: " + "; ".join(why))


GPU_HOSTILE = sorted((PROJECT_ROOT / "kernels" / "fp8_gemm" / "solutions" / "adversarial").glob("sandbox_*.cu"))


def hostile_source(path: Path, folder: Path, port: int) -> str:
    """A sandbox_*.cu kernel aimed at `folder` and at `port` (as benchmarks/sandbox_hostile.py aims them)."""
    text = path.read_text().replace('#define TARGET "/usr/local"', f'#define TARGET "{folder}"')
    return text.replace("#define PORT 4200", f"#define PORT {port}")


@pytest.fixture(scope="module")
def aimed(tmp_path_factory):
    """A read-only folder and a listening port for the kernels to aim at, and a compile cache, shared by the tests
    below (the same source is compiled once for both of the sandbox's modes)."""
    folder = tmp_path_factory.mktemp("aimed")
    (folder / "problems").mkdir()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield folder / "problems", server, folder / "cache"


@raw_syscalls
@pytest.mark.nvcc
@pytest.mark.parametrize("path", GPU_HOSTILE, ids=[p.stem for p in GPU_HOSTILE])
def test_the_gpu_hostile_kernels_host_code_is_denied_without_a_gpu(mode, tmp_path, aimed, path, monkeypatch):
    """The GPU test's kernels, built by the compile path (screen bypassed: they pass it anyway), their entry point
    called in the harness child's confinement: the attack runs before the first CUDA call, so it is denied here as
    on a GPU, and the call its header names is the verdict's."""
    from ksci.evaluate.toolchain.compile import compile_source
    from ksci.evaluate.toolchain.toolchains import find_toolchain

    read_only, server, cache = aimed
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("KSCI_KERNELS_DIR", f"{PROJECT_ROOT / 'kernels'}{os.pathsep}{read_only}")
    monkeypatch.delenv(harness_sandbox.OPT_OUT, raising=False)
    denied = path.read_text().split("crashed: denied system call ", 1)[1].split("`", 1)[0]
    source = hostile_source(path, read_only, server.getsockname()[1])
    compiled = compile_source(source, find_toolchain("cuda"), "sm_90a", cache)
    assert compiled.ok, compiled.log[-2000:]
    library = Path(shutil.copy(compiled.library, scratch / "kernel.so"))
    env = {**child_environment(scratch), "PYTHONPATH": str(PROJECT_ROOT)}
    call = "lib.fp8_gemm(None, None, None, None, None, 128, 128, 128, None)"
    argv = harness_sandbox.confined_child(_hostile_candidate(scratch, library, call), scratch, env)
    outcome = run_child(argv, timeout_s=120, env=env, cwd=scratch)
    if not (outcome.last("sandbox") or {}).get("syscalls", "").startswith("filtered"):
        pytest.skip(f"no syscall filter here: {outcome.output[-500:]}")
    verdict = classify(load_problem("fp8_gemm"), outcome, Verdict(Status.OK, "fp8_gemm", "cuda"))
    assert (verdict.status, verdict.message) == (Status.RUNTIME_ERROR, f"crashed: denied system call {denied}")
    assert list(read_only.iterdir()) == []


def _reached(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
        return True
    except BlockingIOError:
        return False


@pytest.mark.gpu
@pytest.mark.parametrize("path", GPU_HOSTILE, ids=[p.stem for p in GPU_HOSTILE])
def test_on_a_gpu_a_hostile_kernel_is_named_and_writes_nothing(gpu_target, aimed, path, monkeypatch):
    """The whole pipeline (screen, compile, library check, the harness child on the GPU): not ok, the line names
    the denied call, nothing in the read-only folder or /usr/local, no connection to the port."""
    from ksci.evaluate.options import EvaluationOptions
    from ksci.evaluate.stage_order import evaluate_source

    if gpu_target != "cuda":
        pytest.skip("the hostile kernels are CUDA")
    read_only, server, cache = aimed
    monkeypatch.setenv("KSCI_KERNELS_DIR", f"{PROJECT_ROOT / 'kernels'}{os.pathsep}{read_only}")
    problem = load_problem("fp8_gemm")
    denied = path.read_text().split("crashed: denied system call ", 1)[1].split("`", 1)[0]
    options = EvaluationOptions(
        target="cuda", benchmarks=problem.benchmarks[:2], time_baselines=False, policy=QUICK, cache_dir=cache
    )
    verdict = evaluate_source(problem, hostile_source(path, read_only, server.getsockname()[1]), options)
    assert verdict.message == f"crashed: denied system call {denied}", (verdict.status, verdict.harness_log[-2000:])
    assert verdict.status == Status.RUNTIME_ERROR and verdict.fingerprint["sandbox"]["syscalls"].startswith("filtered")
    assert list(read_only.iterdir()) == [] and not list(Path("/usr/local").glob("ksci-sandbox-*"))
    assert not _reached(server)


@pytest.mark.gpu
def test_on_a_gpu_an_honest_kernel_is_ok_under_the_filter(gpu_target, tmp_path):
    from ksci.evaluate.options import EvaluationOptions
    from ksci.evaluate.stage_order import evaluate_source

    if gpu_target != "cuda":
        pytest.skip("the honest kernel here is CUDA")
    problem = load_problem("rmsnorm")
    source = (problem.root / "solutions" / "correct" / "warp_per_row.cu").read_text()
    options = EvaluationOptions(target="cuda", time_baselines=False, policy=QUICK, cache_dir=tmp_path)
    verdict = evaluate_source(problem, source, options)
    assert verdict.status == Status.OK, (verdict.message, verdict.harness_log[-2000:])
    sandbox = verdict.fingerprint["sandbox"]
    assert sandbox["syscalls"].startswith("filtered") and sandbox["capabilities"].startswith("dropped"), sandbox
