"""The compiler's sandbox (ksci/evaluate/sandbox/compiler.py): no spelling of an include, an assembler directive or a macro
reaches a host file, through the real compile path, on every toolchain installed here.

Each hostile form of issue 26 is compiled twice: by compile_source alone (the static screen bypassed, so the
sandbox holds by itself) and through the whole evaluation path (screen, hipify for ROCm, sandboxed compiler,
library check) into a lineage row. Neither the compile log, nor a built library, nor any file of the compile
cache or of the lineage store holds a line of /etc/passwd (`root:x:0`) or a key planted in a .env beside the
cache (as the project's .env sits beside data/) or in the compiler's environment. Toolchain tests skip without
their compiler (CI installs nvcc, hipcc and clang-19).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ksci.backends.simulated import SimulatedBackend
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.sandbox import compiler as sandbox
from ksci.evaluate.stage_order import evaluate_source
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.lineage.store import CandidateMeta, LineageStore, candidate_from_verdict, candidate_id_of
from ksci.problem.spec import load_problem

PASSWD_LINE = b"root:x:0"
KEY = "sk-ksci-planted-7f3a9c0e51d2b4"
PASSWD = "/etc/passwd"
ENTRY = 'extern "C" int rmsnorm(const void* x, const void* weight, void* out, int rows, int cols, void* stream) '
ENTRY += "{ return 0; }\n"

# Each way issue 26 found to make the compiler read a host file (the .env forms get their path at run time).
FORMS = {
    "macro_angle": f"#define P <{PASSWD}>\n#include P\n",
    "spliced_directive": f'#inc\\\nlude "{PASSWD}"\n',
    "digraph": f'%:include "{PASSWD}"\n',
    "include_next": f"#include_next <{PASSWD}>\n",
    "import": f'#import "{PASSWD}"\n',
    "stringize": f"#define S(x) #x\n#define XS(x) S(x)\n#define FILE_ XS({PASSWD})\n#include FILE_\n",
    "push_macro": f'#define F "{PASSWD}"\n#pragma push_macro("F")\n#undef F\n#pragma pop_macro("F")\n#include F\n',
    "form_feed": f'#\finclude "{PASSWD}"\n',
    "vertical_tab": f'#\vinclude "{PASSWD}"\n',
    "nul_byte": f'\0#include "{PASSWD}"\n',
    "bom": f'\ufeff#include "{PASSWD}"\n',
    "asm_include": f'asm(".include \\"{PASSWD}\\"");\n',
    "asm_incbin": f'asm(".section .rodata\\n.incbin \\"{PASSWD}\\"\\n.text");\n',
    "has_include_probe": f'#if __has_include("{PASSWD}") || __has_include("@ENV@")\n#error HOST_FILE_VISIBLE\n#endif\n',
    "env_through_macro": "#define S(x) #x\n#define XS(x) S(x)\n#define ENV XS(@ENV_BARE@)\n#include ENV\n",
    "env_relative": '#include "../../../../.env"\n',  # the work folder is project/data/cache/compile/.key-...
    "proc_environ": '#include "/proc/self/environ"\n',
    "env_incbin": '__asm__(".section .rodata\\n.incbin \\"@ENV@\\"\\n.text");\n',
}
# (target, arch, marker): every compiler a kernel can meet here.
TOOLCHAINS = [
    pytest.param("cuda", "sm_90a", marks=pytest.mark.nvcc, id="nvcc"),
    pytest.param("rocm", "gfx942", marks=pytest.mark.hip_gfx942, id="clang-hip"),
    pytest.param("rocm", "gfx940", marks=pytest.mark.hipcc, id="hipcc"),
]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project folder with a .env holding a key, its compile cache under data/, and the key in the environment."""
    root = tmp_path / "project"
    (root / "data" / "cache" / "compile").mkdir(parents=True)
    (root / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv(sandbox.OPT_OUT, raising=False)
    return root


def hostile(form: str, project: Path) -> str:
    env = project / ".env"
    return FORMS[form].replace("@ENV@", str(env)).replace("@ENV_BARE@", str(env)) + ENTRY


def leaks(data: bytes) -> list[str]:
    """What of the host's secrets `data` holds."""
    return [name for name, secret in (("passwd", PASSWD_LINE), ("key", KEY.encode())) if secret in data]


def leaks_in_folder(folder: Path) -> dict[str, list[str]]:
    return {str(p): found for p in folder.rglob("*") if p.is_file() and (found := leaks(p.read_bytes()))}


@pytest.mark.parametrize("target,arch", TOOLCHAINS)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_sandbox_alone_keeps_host_files_out(project, form, target, arch):
    toolchain = find_toolchain(target, arch)
    cache = project / "data" / "cache" / "compile"
    result = compile_source(hostile(form, project), toolchain, arch, cache)
    assert not leaks(result.log.encode()), result.log
    assert leaks_in_folder(cache) == {}  # result.json, the library, the source
    if form == "has_include_probe":
        assert result.ok and "HOST_FILE_VISIBLE" not in result.log, result.log  # the probe finds nothing
    elif form != "proc_environ":  # no /proc in there either: the include fails, as every other one does
        assert not result.ok and result.library is None, result.log


def test_without_the_sandbox_the_same_source_does_leak(project, monkeypatch):
    """The check above can see a leak: with the sandbox turned off (the documented opt-out), it is there."""
    try:
        toolchain = find_toolchain("rocm", "gfx942")
    except Exception:
        pytest.skip("no clang++ in HIP mode here")
    monkeypatch.setenv(sandbox.OPT_OUT, "1")
    cache = project / "data" / "cache" / "compile"
    result = compile_source(hostile("env_relative", project), toolchain, "gfx942", cache)
    assert leaks(result.log.encode()) == ["key"], result.log


@pytest.mark.parametrize("target,arch", TOOLCHAINS[:2])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_real_path_keeps_host_files_out_of_verdict_cache_and_lineage(project, tmp_path, form, target, arch):
    problem = load_problem("rmsnorm")
    source = hostile(form, project)
    cache = project / "data" / "cache" / "compile"
    options = EvaluationOptions(target=target, arch=arch, compile_only=True, cache_dir=cache)
    verdict = evaluate_source(problem, source, options)
    assert verdict.status != Status.OK
    store = LineageStore(tmp_path / "store")
    meta = CandidateMeta(run="hostile", generation=0, proposer="test", hypothesis=form)
    candidate_id = candidate_id_of(source)
    stored = store.put_source(source, ".cu" if target == "cuda" else ".hip")
    store.append([candidate_from_verdict(verdict, meta, stored, candidate_id)])
    assert len(store.read("hostile")) == 1
    assert not leaks(str(verdict.to_dict()).encode())
    assert leaks_in_folder(tmp_path / "store") == {}
    assert leaks_in_folder(cache) == {}


def test_simulate_screens_as_the_real_path_does(tmp_path):
    """Under --simulate a kernel with #include "/etc/passwd" and cudaStreamCreate was three ok rows: now rejected,
    with the real path's message."""
    problem = load_problem("rmsnorm")
    source = f'#include "{PASSWD}"\n' + ENTRY.replace("return 0;", "cudaStreamCreate(0); return 0;")
    options = EvaluationOptions(target="cuda", phases=("verify", "benchmark"), cache_dir=tmp_path)
    verdict = evaluate_source(problem, source, options, backend=SimulatedBackend(None))
    assert verdict.status == Status.REJECTED
    assert verdict.message.startswith("rejected by the static screen: line 1: includes the file '/etc/passwd'")
    streams = ENTRY.replace("return 0;", "cudaStream_t s; cudaStreamCreate(&s); return 0;")
    assert evaluate_source(problem, streams, options, backend=SimulatedBackend(None)).status == Status.REJECTED
    clean = evaluate_source(problem, ENTRY, options, backend=SimulatedBackend(None))
    assert clean.status == Status.OK  # the simulator still simulates what the screen lets through


def _in_sandbox(script: str, project: Path) -> subprocess.CompletedProcess:
    work = project / "data" / "cache" / "compile"
    root = sandbox.Root(
        sandbox.toolchain_paths([]), [str(work)], cwd=str(work), env=sandbox.compiler_environment("cuda")
    )
    argv = sandbox.wrap(["/bin/sh", "-c", script], root)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_inside_the_sandbox_host_files_network_and_keys_are_gone(project):
    (project / "data" / "lineage.parquet").write_text("a lineage")  # beside the work folder's parents: not in there
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        script = (
            f"for f in /etc/passwd /etc/shadow /root {Path.home()} {project}/.env {project}/data/lineage.parquet; do "
            f'test -e "$f" && echo "visible: $f"; done; '
            f'env | grep -q "{KEY}" && echo "key in env"; '
            f'/usr/bin/python3 -c "{connect}" 2>/dev/null && echo "network reached"; '
            f"echo written > {project}/data/cache/compile/out && echo done"
        )
        proc = _in_sandbox(script, project)
    assert proc.stdout.strip() == "done", proc.stdout + proc.stderr
    assert (project / "data" / "cache" / "compile" / "out").read_text() == "written\n"  # the work folder is writable


def test_no_sandbox_means_no_compile_with_one_line(tmp_path):
    """Where namespaces are refused (here: an `unshare` first on PATH that fails as a locked-down kernel makes it
    fail), `ksci evaluate` refuses with one line, rc 3; the opt-out variable lets it compile."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n")
    (tools / "unshare").chmod(0o755)
    source = tmp_path / "k.cu"
    source.write_text("#include <cuda_runtime.h>\n" + ENTRY)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "KSCI_COMPILE_CACHE": str(tmp_path / "c")}
    env.pop(sandbox.OPT_OUT, None)
    argv = [sys.executable, "-m", "ksci.cli", "evaluate", "--problem", "rmsnorm", "--source", str(source)]
    refused = subprocess.run([*argv, "--compile-only"], capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ksci: cannot run here: cannot sandbox the compiler"), lines
    assert "Operation not permitted" in lines[0] and f"set {sandbox.OPT_OUT}=1" in lines[0]
    assert not (tmp_path / "c").exists()  # nothing was compiled
    opted_out = subprocess.run(
        [*argv, "--compile-only"], capture_output=True, text=True, env={**env, sandbox.OPT_OUT: "1"}, timeout=300
    )
    assert opted_out.returncode == 0, opted_out.stdout + opted_out.stderr


def test_refusal_is_an_environment_problem(monkeypatch):
    monkeypatch.delenv(sandbox.OPT_OUT, raising=False)
    monkeypatch.setattr(sandbox, "sandbox_status", lambda: sandbox.SandboxStatus(False, reason="namespaces refused"))
    with pytest.raises(EnvironmentProblem, match=r"^cannot sandbox the compiler on this host \(namespaces refused\)"):
        sandbox.require_sandbox()
    monkeypatch.setenv(sandbox.OPT_OUT, "1")
    sandbox.require_sandbox()  # opted out: no refusal


@pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces")
def test_sandbox_for_an_unprivileged_user_is_made_with_a_user_namespace_or_refused(tmp_path):
    """As `nobody` (uid 65534) the sandbox is made with a user namespace (this host allows them), or, where the
    kernel refuses them, compiling is refused: never run unconfined."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to become another user")
    code = (
        "import json; from ksci.evaluate.sandbox import compiler as s; st = s.sandbox_status()\n"
        "try:\n    s.require_sandbox(); refused = None\nexcept Exception as exc:\n    refused = str(exc)\n"
        "print(json.dumps([st.ok, st.mode, refused]))"
    )
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "TMPDIR": str(tmp_path)}
    tmp_path.chmod(0o777)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    ok, mode, refused = json.loads(proc.stdout)
    if ok:
        assert mode == "user namespace" and refused is None
    else:
        assert refused.startswith("cannot sandbox the compiler on this host")
