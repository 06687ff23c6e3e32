"""The harness child's sandbox without a GPU: its environment, its limits, its network, its copy of the library."""

from __future__ import annotations

import json
import subprocess
import sys

from children import reporting_child

from ksci.evaluate.harness_process import SpareHarnesses, child_environment
from ksci.evaluate.isolate import run_child

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
        from ksci.evaluate.harness.sandbox import drop_network, limit_resources
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
