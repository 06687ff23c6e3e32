"""The Prefect UI of a finished evolution, in headless Chromium: the generation's artifacts are there.

A real `prefect server start` on loopback; `ksci evolve` (with the GPU simulator) runs against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import rendered_dom
from support.prefect_db import seeded_home

from ksci.lineage.store import LineageStore

ROOT = Path(__file__).resolve().parent.parent
PORT = 4263
URL = f"http://127.0.0.1:{PORT}"

pytestmark = [pytest.mark.slow, pytest.mark.chromium]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = seeded_home(tmp_path_factory.mktemp("prefect-home"))
    env = dict(
        os.environ,
        PREFECT_HOME=str(home),
        PREFECT_API_URL=f"{URL}/api",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    prefect = Path(sys.executable).parent / "prefect"
    proc = subprocess.Popen(
        [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(PORT)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(180):
            try:
                urllib.request.urlopen(f"{URL}/api/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_generation_artifacts_show_in_the_ui(server, tmp_path):
    store = tmp_path / "store"
    evolve = subprocess.run(
        [
            sys.executable,
            "-m",
            "ksci.cli",
            "evolve",
            "--problem",
            "fp8_gemm",
            "--generations",
            "1",
            "--children",
            "2",
            "--run",
            "ui-check",
            "--store",
            str(store),
            "--simulate",
        ],
        cwd=ROOT,
        env=server,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert evolve.returncode == 0, evolve.stdout[-2000:] + evolve.stderr[-2000:]
    candidates = set(LineageStore(store).read("ui-check")["candidate_id"])

    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with SyncPrefectClient(f"{URL}/api") as client:
        (generation,) = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["evolve-generation"])))
        artifacts = {a.key: a for a in client.read_artifacts() if a.flow_run_id == generation.id and a.key}
    assert set(artifacts) == {"ui-check-gen-0", "ui-check-gen-0-summary"}

    page = rendered_dom(f"{URL}/runs/flow-run/{generation.id}", tmp_path / "p1")
    assert generation.name in page and "Artifacts" in page
    table = rendered_dom(f"{URL}/artifacts/artifact/{artifacts['ui-check-gen-0'].id}", tmp_path / "p2")
    assert generation.name in table  # the artifact page links its flow run
    assert candidates and all(c in table for c in candidates)  # and shows the candidates' table
    summary = rendered_dom(f"{URL}/artifacts/artifact/{artifacts['ui-check-gen-0-summary'].id}", tmp_path / "p3")
    assert "generation 0" in summary and "ksci report --run ui-check" in summary
