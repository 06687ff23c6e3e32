"""`ksci evolve --proposer llm --simulate` against hostile scripted endpoints, as a user runs it (issue 26):
- an endpoint that echoes the API key (or the base URL's password) into every answer: afterwards neither is found
  in the whole store, PREFECT_HOME (prefect.db, its WAL, the stored task results), the report or the output;
- an endpoint that refuses the key: the run stops at its first call with rc 3 and one line, its row recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fp8_gemm_script import demo_config_toml, steady_script
from support.leak_search import readable
from support.prefect_db import seeded_home
from support.scripted_llm_server import ScriptedLlmServer
from support.shared_api import with_shared_api

from ksci.llm.ledger import LlmLedger

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-live-ECHOED-7f3a9c"
PASSWORD = "hunter2-URLPASS-x9"
EVOLVE = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", "fp8_gemm", "--target", "cuda", "--children", "3"]


def _evolve(
    tmp_path: Path, base_url: str, run: str, generations: int, api: str | None = None
) -> subprocess.CompletedProcess:
    """The run on an embedded Prefect API of its own (its database is searched for secrets), or on `api`."""
    config = tmp_path / "ksci.toml"
    config.write_text(demo_config_toml(base_url, timeout_s=10.0, retry_delay_s=0.1))
    command = EVOLVE + ["--proposer", "llm", "--llm-config", str(config), "--generations", str(generations)]
    command += ["--run", run, "--store", str(tmp_path / "store"), "--simulate"]
    env = dict(os.environ, PREFECT_HOME=str(seeded_home(tmp_path / "prefect")), PYTHONPATH=str(ROOT))
    env["KSCI_LLM_API_KEY"] = KEY
    env.pop("PREFECT_API_URL", None)
    env = with_shared_api(env, api) if api else env
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


def _holding(folder: Path, secret: str) -> list[str]:
    """The files under `folder` that contain `secret` (UTF-8), in their bytes or in the values they encode."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in readable(p)]


@pytest.mark.parametrize("secret", ["key", "url_password"])
def test_an_echoed_secret_is_stored_nowhere(tmp_path, secret):
    """With a password in the base URL, httpx sends it as basic auth instead of the key: the server echoes what
    it got, so each case has its own run."""
    with ScriptedLlmServer({**steady_script(), "options": {"echo_key": True}}) as server:
        url = server.base_url.replace("http://", f"http://alice:{PASSWORD}@") if secret == "url_password" else None
        done = _evolve(tmp_path, url or server.base_url, "echo", generations=2)
        assert server.count("writer") >= 3
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    report = tmp_path / "report.html"
    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"), PYTHONPATH=str(ROOT))
    made = subprocess.run(
        [sys.executable, "-m", "ksci.cli", "report", "--run", "echo", "--store", str(tmp_path / "store")]
        + ["-o", str(report)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0 and report.is_file(), made.stdout + made.stderr
    echoed = KEY if secret == "key" else PASSWORD
    calls = LlmLedger(tmp_path / "store").calls("echo")
    assert (calls["outcome"] == "ok").sum() >= 5  # the echoed answers were used, not refused
    assert (tmp_path / "prefect").is_dir() and any((tmp_path / "prefect").rglob("prefect.db*"))
    for folder in (tmp_path / "store", tmp_path / "prefect"):
        assert _holding(folder, echoed) == [], f"{secret} found under {folder}"
    assert echoed not in report.read_text() and echoed not in out and echoed not in made.stdout + made.stderr
    # The echo did reach what was stored: the model name in each written source's first line, scrubbed and labelled.
    sources = [p.read_text() for p in (tmp_path / "store").rglob("*.cu")]
    assert any(s.startswith("// ksci: written by LLM scripted__you_sent__redacted__ (") for s in sources)


def test_a_refused_key_stops_the_run_with_rc_3_and_one_line(tmp_path, shared_prefect_api):
    script = {**steady_script(), "selector": [{"status": 401, "content": "invalid api key", "repeat": True}]}
    with ScriptedLlmServer(script) as server:
        done = _evolve(tmp_path, server.base_url, "refused", generations=3, api=shared_prefect_api)
        assert server.count() == 1  # no retry, no fallback to the designer
    out = done.stdout + done.stderr
    assert done.returncode == 3, out[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("ksci: ")]
    assert len(lines) == 1 and lines[0].startswith("ksci: cannot run here: the LLM endpoint refused the API key")
    assert "HTTP 401 from http://127.0.0.1:" in lines[0] and "design unusable" not in out
    assert "in cmd_evolve" not in out  # no traceback out of the CLI
    calls = LlmLedger(tmp_path / "store").calls("refused")
    assert list(calls["outcome"]) == ["auth"] and list(calls["stage"]) == ["selector"]
