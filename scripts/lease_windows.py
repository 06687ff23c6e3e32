"""What a Prefect server frozen just after a GPU slot was taken leaves on disk, counted over many freezes. CPU only.

Prefect's API takes a slot in three steps: it counts the slot in its database, writes the lease's file, then adds
the lease to its index of expirations (prefect/server/api/concurrency_limits_v2.py, lease_storage/filesystem.py).
Its repossessor reads the index alone. A server killed between two of the steps leaves a slot that it never frees:

- "slot, no lease": counted, no lease file; nothing can expire it.
- "lease not indexed": the lease file is there but not in the index; Prefect's repossessor never sees it.
  ksci's own release for the embedded API (tasks/gpu.py) reads the lease files, not the index, and frees it.

A client process takes and releases one slot of a `prefect server start` on loopback, over and over (through
tasks.gpu.any_free_gpu, as a candidate does); this script freezes the server (SIGSTOP) at the first look that finds
the slot taken, as tests/test_faults.py does before its kill, records the state, and lets the server go on.

    python scripts/lease_windows.py --freezes 150     # about 2 minutes on 2 cores

2026-11-21, this machine (2 cores), Prefect 3.9.1, two runs of 150 freezes: 147 consistent, 2 "lease not
indexed", 1 "slot, no lease" (a first version of this script); 148, 1, 1 (this one).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_faults import _free_port, _gpu_slots_taken, _leases, _start_prefect_server  # noqa: E402

CLIENT = textwrap.dedent("""
    import time
    from tasks.gpu import any_free_gpu, ensure_gpu_limit
    ensure_gpu_limit("0")
    while True:
        with any_free_gpu(["0"]):
            time.sleep(0.3)
        time.sleep(0.2)
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--freezes", type=int, default=150)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(dict(count(Path(folder), args.freezes)))


def count(folder: Path, freezes: int) -> collections.Counter:
    port, home = _free_port(), folder / "server"
    server = _start_prefect_server(port, home, folder / "server.log")
    env = dict(os.environ, PREFECT_API_URL=f"http://127.0.0.1:{port}/api", PREFECT_HOME=str(folder / "client"))
    env["PYTHONPATH"] = str(ROOT)
    client = subprocess.Popen([sys.executable, "-c", CLIENT], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    states: collections.Counter = collections.Counter()
    was_taken = True  # wait for a free look first: the freeze comes at the first look after a take
    try:
        while sum(states.values()) < freezes:
            if client.poll() is not None:
                raise SystemExit(f"the client process ended with {client.returncode}")
            taken = _gpu_slots_taken(home)
            if taken and not was_taken:
                os.killpg(server.pid, signal.SIGSTOP)
                states[_state(home)] += 1
                os.killpg(server.pid, signal.SIGCONT)
            was_taken = taken
            time.sleep(0.1)
    finally:
        client.kill()
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    return states


def _state(home: Path) -> str:
    held, indexed = _leases(home)
    if not _gpu_slots_taken(home):
        return "released before the freeze"
    if not held:
        return "slot, no lease"
    return "consistent" if held <= indexed else "lease not indexed"


if __name__ == "__main__":
    main()
