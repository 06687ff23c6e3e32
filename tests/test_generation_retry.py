"""A failed generation of a deployed evolution, retried on its own, then the evolution carried on to its end.

The deployed set-up of docs/prefect-ui.md, as scripts/check_deployment.sh starts it:
a real `prefect server` on loopback, the process work pool, `prefect deploy --all`, one worker. An evolution of
`evolve/simulated` (2 generations on the GPU simulator) loses its GPU while generation 0 verifies one seed (a
simulator fault), so that generation's flow run fails, and the evolution with it. The GPU comes back; then

- in headless Chromium: Retry on the generation's flow-run page (and Retry in the dialog that asks): the same
  flow run completes on the worker; Retry on the evolution's page: it runs generation 1 and completes;
- from the command line: `prefect flow-run retry <id>` of the generation, then of the evolution;
- `prefect flow-run retry <id>` of the evolution alone: it retries its failed generation, then goes on.

Either way the lineage ends with every candidate of both generations written exactly once, and each generation
has had one flow run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cdp import Page
from support.prefect_db import seeded_home

from ksci.lineage.store import KEY
from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
PORT = 4277
URL = f"http://127.0.0.1:{PORT}"
PREFECT = str(Path(sys.executable).parent / "prefect")
WAIT_S = 240  # the longest any one step may take (each took 10-40 s on 2 cores)
CHILDREN = 3  # generation 1's candidates in the `simulated` deployment (prefect.yaml)
WORKER_LOG: list[Path] = []  # the worker's log, set by the `deployed` fixture: what a failed case shows

pytestmark = [pytest.mark.slow, pytest.mark.chromium]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """Server, pool, deployments and one worker, shared by the cases: the environment that reaches them."""
    work = tmp_path_factory.mktemp("deployed")
    env = dict(
        os.environ,
        PREFECT_HOME=str(seeded_home(work / "prefect")),
        PREFECT_API_URL=f"{URL}/api",
        KSCI_PROJECT_DIR=str(ROOT),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_RESULTS_PERSIST_BY_DEFAULT="true",
        PREFECT_WORKER_QUERY_SECONDS="2",  # the worker looks for flow runs every 2 s (Prefect's default: 10)
    )
    server = _start([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(PORT)], env, work / "server.log")
    worker = None
    try:
        _wait_until(_healthy, 180, "a healthy server")
        _prefect(env, "work-pool", "create", "ksci-gpu", "--type", "process", "--overwrite")
        _prefect(env, "--no-prompt", "deploy", "--all")
        WORKER_LOG.append(work / "worker.log")
        worker = _start([PREFECT, "worker", "start", "--pool", "ksci-gpu"], env, WORKER_LOG[0])
        yield env
    finally:
        if worker:
            _stop(worker, signal.SIGINT)  # as Prefect asks, before the server
        _stop(server, signal.SIGTERM)


RUNS = ("ui-retry", "cli-retry", "parent-retry")  # one evolution per case


@pytest.fixture(scope="module")
def failing(deployed, tmp_path_factory) -> dict[str, Path]:
    """Every case's evolution, triggered at once so that they fail side by side: name -> its folder (recording.json,
    the fault; store/, the lineage). Each loses its GPU while generation 0 verifies the mma seed."""
    mma = load_problem("fp8_gemm").template("cuda", "mma")
    folders = {}
    for run in RUNS:
        folder = folders[run] = tmp_path_factory.mktemp(run)
        recording = folder / "recording.json"
        recording.write_text(json.dumps([{"template": "mma", "params": mma.default, "status": "environment_error"}]))
        parameters = [f"store_root={folder / 'store'}", f"run={run}", f"simulate={recording}"]
        run_it = ["deployment", "run", "evolve/simulated", "--flow-run-name", run]
        _prefect(deployed, *run_it, *[a for p in parameters for a in ("-p", p)])
    return folders


def test_retry_in_the_ui(failing, tmp_path):
    evolution, generation = _failed(failing, "ui-retry")
    with Page(tmp_path / "chromium") as page:
        # From the evolution's page, as a user finds it: its Subflow Runs tab lists the generation.
        page.open(f"{URL}/runs/flow-run/{evolution['id']}")
        page.click("Subflow Runs", selector="*")  # a tab: the innermost element that reads so
        page.click(generation["name"], selector="a")
        page.wait_for(f"location.pathname.endsWith('{generation['id']}')", 30, "the generation's page")
        failed = _state(generation["id"])
        _press_retry(page, generation["id"], failed)
        _assert_completed(generation["id"], failed)
        page.open(f"{URL}/runs/flow-run/{evolution['id']}")
        failed = _state(evolution["id"])
        _press_retry(page, evolution["id"], failed)
        _assert_completed(evolution["id"], failed)
        page.open(f"{URL}/runs/flow-run/{evolution['id']}")
        page.wait_for("document.body.innerText.includes('Completed')", 60, "the evolution shown Completed")
    _assert_every_candidate_once(failing["ui-retry"] / "store", "ui-retry")


def test_retry_from_the_command_line(deployed, failing):
    evolution, generation = _failed(failing, "cli-retry")
    for flow_run in (generation, evolution):
        failed = _state(flow_run["id"])
        out = _prefect(deployed, "flow-run", "retry", flow_run["id"])
        assert "scheduled for retry" in out
        _assert_completed(flow_run["id"], failed)
    _assert_every_candidate_once(failing["cli-retry"] / "store", "cli-retry")


def test_retry_of_the_evolution_alone_retries_its_failed_generation(deployed, failing):
    evolution, _generation = _failed(failing, "parent-retry")
    failed = _state(evolution["id"])
    _prefect(deployed, "flow-run", "retry", evolution["id"])
    _assert_completed(evolution["id"], failed)
    _assert_every_candidate_once(failing["parent-retry"] / "store", "parent-retry")


def _failed(failing: dict[str, Path], run: str) -> tuple[dict, dict]:
    """Wait for the evolution `run` to fail at generation 0, then give the GPU back; the evolution's and
    generation 0's flow runs."""
    evolution = _wait_until(lambda: _flow_run(run), 60, f"flow run {run}")
    assert _final(evolution["id"]) == "Failed"
    generation = _flow_run(f"{run}-gen-0")
    assert generation["state_name"] == "Failed" and generation["deployment_id"]  # what shows the Retry button
    assert not _flow_run(f"{run}-gen-1")  # the evolution stopped at the failed generation
    (failing[run] / "recording.json").write_text("[]")  # the GPU is back
    return evolution, generation


def _press_retry(page: Page, flow_run_id: str, before: dict) -> None:
    """On a flow run's page: Retry, and Retry again in the dialog that asks "Retry <name>?".

    A click that lands while the page is still being built can go unheard (seen once in CI on 2 busy cores: the
    button was shown, no dialog came), so the first Retry is pressed again until the dialog opens, but only while
    the server still holds the state `before`: a dialog that opened late may have been answered by that second
    press (the dialog's Retry is the last button reading so), and a second retry would reschedule the run again."""
    for attempt in range(5):
        if _state(flow_run_id)["id"] != before["id"]:
            return  # the retry was taken
        page.click("Retry")
        try:
            page.wait_for("!!document.querySelector('.p-modal')", 10, "the dialog")
            break
        except AssertionError:
            if attempt == 4:
                raise
    page.click("Retry", selector=".p-modal button")
    page.wait_for("!document.querySelector('.p-modal')", 30, "the dialog closed")


def _assert_every_candidate_once(store: Path, run: str) -> None:
    parts = sorted(store.glob(f"{run}/candidates/part-*.parquet"))
    table = pa.concat_tables([pq.read_table(p, columns=list(KEY)) for p in parts])
    written = list(zip(*(table[k].to_pylist() for k in KEY), strict=True))
    assert len(written) == len(set(written)), "a candidate was written twice"
    seeds = len(load_problem("fp8_gemm").templates_for("cuda"))
    assert sorted(g for _, _, g in written) == [0] * seeds + [1] * CHILDREN
    (first,) = _flow_runs(f"{run}-gen-0")  # retrying the evolution started no second flow run of generation 0:
    assert first["run_count"] == 2  # the one that failed ran again,
    assert first["labels"].get("prefect.worker.name")  # on a worker (which labels what it runs)
    assert len(_flow_runs(f"{run}-gen-1")) == 1


# -- the server, through its REST API (the test process itself never imports Prefect's settings)


def _api(path: str, body: dict | None = None):
    request = urllib.request.Request(
        f"{URL}/api{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def _flow_runs(name: str) -> list[dict]:
    return _api("/flow_runs/filter", {"flow_runs": {"name": {"any_": [name]}}})


def _flow_run(name: str) -> dict | None:
    runs = _flow_runs(name)
    assert len(runs) <= 1, f"{len(runs)} flow runs named {name}"
    return runs[0] if runs else None


def _state(flow_run_id: str) -> dict:
    return _api(f"/flow_runs/{flow_run_id}")["state"]


def _final(flow_run_id: str, before: dict | None = None) -> str:
    """The name of the final state a flow run ends in, other than the state `before` a retry (its old Failed state
    never reads as the retry's outcome)."""
    terminal = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}

    def ended():
        state = _state(flow_run_id)
        if before is not None and state["id"] == before["id"]:
            return None
        return state["name"] if state["type"] in terminal else None

    return _wait_until(ended, WAIT_S, f"flow run {flow_run_id} in a final state")


def _assert_completed(flow_run_id: str, before: dict) -> None:
    """The flow run, retried from the state `before`, ends Completed; if not, the worker's log says why."""
    final = _final(flow_run_id, before)
    log = WORKER_LOG[0].read_text(errors="replace")[-6000:] if WORKER_LOG else ""
    assert final == "Completed", f"flow run {flow_run_id} ended {final}; the worker's log ends:\n{log}"


def _healthy() -> bool:
    try:
        return _api("/health") is True
    except OSError:
        return False


def _wait_until(probe: Callable, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"no {what} after {timeout_s} s")


def _prefect(env: dict, *args: str) -> str:
    done = subprocess.run([PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def _start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("w") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(process: subprocess.Popen, sig: int) -> None:
    """Signal a process group that this module started; kill it if it has not ended 30 s later."""
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass
