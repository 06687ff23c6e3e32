"""The harness child's sandbox without a GPU: its environment, its limits, its network, its copy of the library, and
the files it can see (its sandbox set up on CPU: a GPU host adds only its device files)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from children import reporting_child

from ksci import PROJECT_ROOT
from ksci.evaluate.options import EnvironmentProblem
from ksci.evaluate.run.harness_process import SpareHarnesses, child_environment
from ksci.evaluate.run.isolate import run_child
from ksci.evaluate.sandbox import harness as harness_sandbox
from ksci.evaluate.sandbox.compiler import SandboxStatus
from ksci.evaluate.sandbox.harness import OPT_OUT as HARNESS_OPT_OUT
from ksci.evaluate.sandbox.harness import confined_child

SECRETS = {
    "OPENAI_API_KEY": "sk-fake-openai",
    "ANTHROPIC_API_KEY": "sk-fake-anthropic",
    "PREFECT_API_KEY": "pnu_fake",
    "PREFECT_API_URL": "http://127.0.0.1:4200/api",
    "AWS_SECRET_ACCESS_KEY": "fake",
    "CUDA_FAKE_TOKEN": "fake",  # a secret under an allowed prefix is still dropped
    "HTTPS_PROXY": "http://proxy:3128",
}


def test_the_child_sees_no_secrets_and_lives_in_its_scratch_folder(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = child_environment(scratch)
    argv = reporting_child(tmp_path, 'send("environ", environ=dict(os.environ), cwd=os.getcwd())')
    outcome = run_child(argv, timeout_s=60, env=env, cwd=scratch)
    (message,) = outcome.events("environ")
    seen = message["environ"]
    assert not set(SECRETS) & set(seen), sorted(set(SECRETS) & set(seen))
    assert not any(name.startswith("PREFECT_") for name in seen)
    assert seen["CUDA_VISIBLE_DEVICES"] == "0" and seen["HOME"] == str(scratch) and seen["TMPDIR"] == str(scratch)
    assert message["cwd"] == str(scratch)
    assert "PATH" in seen and "KSCI_KERNELS_DIR" in seen


def test_limits_and_network_isolation_are_applied_or_reported(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        import resource, socket
        from ksci.evaluate.sandbox.harness import drop_network, limit_resources
        limits = limit_resources(30)
        network = drop_network()
        send("sandbox", limits=limits, network=network,
             cpu=resource.getrlimit(resource.RLIMIT_CPU), fsize=resource.getrlimit(resource.RLIMIT_FSIZE),
             nofile=resource.getrlimit(resource.RLIMIT_NOFILE), interfaces=[n for _, n in socket.if_nameindex()])
        try:
            with open("big.bin", "wb") as f:
                f.write(b"x" * (65 * 2**20))
            send("wrote")
        except OSError as exc:
            send("write_refused", message=str(exc))
        """,
    )
    outcome = run_child(argv, timeout_s=60, cwd=tmp_path, env={"PYTHONPATH": ":".join(sys.path)})
    message = outcome.last("sandbox")
    assert message is not None, outcome.output
    assert message["cpu"] == [120, 120] and message["fsize"] == [64 * 2**20] * 2 and message["nofile"] == [1024] * 2
    if message["network"].startswith("isolated"):
        assert message["interfaces"] == ["lo"]  # an empty namespace: loopback only, and it is down
    else:
        assert "EPERM" in message["network"] or "not permitted" in message["network"]
    # Past RLIMIT_FSIZE the write fails (EFBIG, as SIGXFSZ is ignored by Python) or the child dies of SIGXFSZ.
    assert outcome.last("wrote") is None
    assert outcome.last("write_refused") is not None or outcome.returncode == -25
    assert json.dumps(message)  # what the fingerprint records is plain JSON


def test_the_harness_child_exits_without_running_when_its_parent_gives_no_go_ahead(tmp_path):
    """End of file on stdin before the go-ahead: the parent gave up (killed, or the wait for a GPU failed)."""
    from ksci.evaluate.harness.child import NO_GO_AHEAD

    request = tmp_path / "request.json"
    request.write_text(json.dumps({"problem": "fp8_gemm", "library": None, "target": "cuda"}))
    env = {**child_environment(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    argv = [sys.executable, "-m", "ksci.evaluate.harness.child", str(request), "--report-fd", "1"]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == NO_GO_AHEAD, done.stderr
    assert done.stdout == ""  # reported nothing: no "started", so no GPU runtime was started either


def test_spare_harnesses_are_taken_before_any_is_started_and_close_ends_the_rest():
    """Real harness children, started for a request (problem and options) before any candidate asks; each runs
    one candidate at most, so a take removes one and starts as many as are missing."""
    pool = SpareHarnesses()
    request = {"problem": "fp8_gemm", "target": "cuda", "phases": ["verify"]}
    first = pool.take(request, spares=2)  # none ready: this one is started now, two spares beside it
    assert pool.ready(request) == 2
    second = pool.take(request, spares=0)  # a spare, and none started in its place
    assert pool.ready(request) == 1
    other = pool.take({**request, "phases": ["benchmark"]}, spares=1)  # other options, other spares
    assert pool.ready(request) == 1 and pool.ready({**request, "phases": ["benchmark"]}) == 1
    assert pool.close() == 2 and pool.ready(request) == 0
    pool.fill(request, 1)  # as at a run's start, before any candidate asks
    assert pool.ready(request) == 1 and pool.close() == 1
    folders = [started.scratch for started in (first, second, other)]
    assert all((folder / "request.json").exists() for folder in folders)
    for started in (first, second, other):
        started.close()  # never run: killed, and its scratch folder deleted
    assert not any(folder.exists() for folder in folders)


def _confined_python(scratch: Path, code: str) -> subprocess.CompletedProcess:
    """Run `code` with the harness child's Python, in the harness child's sandbox (no GPU needed to set it up)."""
    script = scratch / "probe.py"
    script.write_text(textwrap.dedent(code))
    env = {**child_environment(scratch), "PYTHONPATH": str(PROJECT_ROOT)}
    argv = confined_child([sys.executable, str(script)], scratch, env)
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=scratch, timeout=120)


def test_the_confined_child_reads_its_scratch_python_and_problems_but_no_host_file(tmp_path, monkeypatch):
    monkeypatch.delenv(HARNESS_OPT_OUT, raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "secret.env").write_text("OPENAI_API_KEY=sk-planted\n")  # beside the scratch folder: not in there
    hidden = ["/etc/passwd", "/etc/shadow", str(Path.home() / ".bashrc"), str(PROJECT_ROOT / ".env"),
              str(PROJECT_ROOT / "data"), str(tmp_path / "secret.env"), "/proc/1/environ"]  # fmt: skip
    proc = _confined_python(
        scratch,
        f"""
        import json, os
        from ksci.problem.spec import load_problem
        seen = {{}}
        for path in {hidden!r}:
            try:
                with open(path, "rb") as fh:
                    seen[path] = "read " + str(fh.read(40))
            except OSError as exc:
                seen[path] = exc.strerror
        with open("written", "w") as fh:
            fh.write("ok")
        print(json.dumps({{"seen": seen, "problem": load_problem("rmsnorm").name, "pid": os.getpid()}}))
        """,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # /proc/1 is the sandbox's own first process here (its environment is the child's allowlist), not the host's init.
    leaked = {p: why for p, why in report["seen"].items() if why.startswith("read") and p != "/proc/1/environ"}
    assert leaked == {}, leaked
    assert "sk-planted" not in proc.stdout and "root:x:0" not in proc.stdout
    assert report["problem"] == "rmsnorm" and (scratch / "written").read_text() == "ok"
    assert report["pid"] < 10  # a PID namespace of its own: the host's processes are not in its /proc


def test_the_real_harness_child_starts_in_its_sandbox_and_waits_for_its_go_ahead(tmp_path, monkeypatch):
    """Python, torch, the problem's reference: everything the child loads before its GPU is loaded in there."""
    from ksci.evaluate.harness.child import NO_GO_AHEAD

    monkeypatch.delenv(HARNESS_OPT_OUT, raising=False)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"problem": "fp8_gemm", "library": None, "target": "cuda"}))
    env = {**child_environment(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    argv = [sys.executable, "-m", "ksci.evaluate.harness.child", str(request)]
    argv = [*confined_child(argv, tmp_path, env), "--report-fd", "1"]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == NO_GO_AHEAD, done.stderr


def test_no_sandbox_for_the_child_is_one_line_unless_opted_out(tmp_path, monkeypatch):
    monkeypatch.delenv(HARNESS_OPT_OUT, raising=False)
    broken = SandboxStatus(False, reason="unshare: unshare failed: Operation not permitted")
    monkeypatch.setattr(harness_sandbox, "sandbox_status", lambda: broken)
    with pytest.raises(EnvironmentProblem) as raised:
        confined_child(["python"], tmp_path, {})
    assert str(raised.value).startswith("cannot sandbox the harness child on this host (unshare: unshare failed")
    assert f"set {HARNESS_OPT_OUT}=1" in str(raised.value) and "\n" not in str(raised.value)
    monkeypatch.setenv(HARNESS_OPT_OUT, "1")
    assert confined_child(["python"], tmp_path, {}) == ["python"]


def test_a_set_up_that_fails_is_reported_not_passed(tmp_path, monkeypatch):
    """A sandbox whose set-up fails (here: a scratch folder that is gone, so its bind mount fails) ends the child
    with the set-up's one line and exit status 125, before it could report "started": the parent then says "the
    harness did not start (exit 125): ksci sandbox: ..." (ksci.evaluate.judge.classify) instead of running unconfined."""
    monkeypatch.delenv(HARNESS_OPT_OUT, raising=False)
    gone = tmp_path / "gone"
    argv = confined_child([sys.executable, "-c", "print('started')"], gone, {"PATH": "/usr/bin"})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 125 and "started" not in done.stdout
    assert done.stderr.startswith(f"ksci sandbox: mount {gone} on ") and len(done.stderr.splitlines()) == 1
