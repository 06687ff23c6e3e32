"""A store on a full filesystem (issue 51): `ksci evolve` ends with exit code 1 and one line that names the file it
could not write and the error (ENOSPC), every row recorded before stays, and once there is room the same command
with `--run` completes the run with those rows and no row twice.

The full disk is real: the store is a 48 KiB tmpfs mounted in a user and mount namespace of the test's own
(util-linux `unshare`, as the compiler's sandbox uses), grown to 64 MiB before the rerun."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.shared_api import with_shared_api

from ksci.lineage.store import LineageStore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
EVOLVE = '"$PY" -m ksci.cli evolve --problem fp8_gemm --target cuda --children 3 --generations 2 --run full '
SCRIPT = f"""
set -u
mount -t tmpfs -o size=48k tmpfs "$STORE"
{EVOLVE} --store "$STORE" --simulate --quiet >"$OUT/out1" 2>"$OUT/err1"
echo $? >"$OUT/rc1"
cp -a "$STORE" "$OUT/after1"
mount -o remount,size=64m "$STORE"
{EVOLVE} --store "$STORE" --simulate --quiet >"$OUT/out2" 2>"$OUT/err2"
echo $? >"$OUT/rc2"
cp -a "$STORE" "$OUT/after2"
"""


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = [unshare, "--user", "--map-root-user", "--mount", "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="no user and mount namespace here (unshare)")
def test_a_full_store_ends_the_run_in_one_line_and_the_rerun_loses_nothing(tmp_path, shared_prefect_api):
    store, out = tmp_path / "store", tmp_path / "out"
    store.mkdir()
    out.mkdir()
    env = dict(os.environ, STORE=str(store), OUT=str(out), PY=sys.executable, PYTHONPATH=str(ROOT))
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), KSCI_COMPILE_CACHE=str(tmp_path / "cache"))
    env = with_shared_api(env, shared_prefect_api)  # the store is what fills up, not the API's database
    namespace = ["unshare", "--user", "--map-root-user", "--mount", "bash", "-c", SCRIPT]
    subprocess.run(namespace, cwd=ROOT, env=env, timeout=900, check=True)
    err1 = (out / "err1").read_text()
    assert (out / "rc1").read_text().strip() == "1", err1
    assert err1.count("\n") == 1 and err1.startswith("ksci: evolution full stopped: "), err1
    assert f"{store}/" in err1 and "No space left on device (ENOSPC)" in err1 and "--run full" in err1
    assert (out / "rc2").read_text().strip() == "0", (out / "err2").read_text()[-3000:]
    before = LineageStore(out / "after1").read("full")
    after = LineageStore(out / "after2").read("full")
    assert set(before["candidate_id"]) <= set(after["candidate_id"])  # nothing recorded before is lost
    assert not after.duplicated(["candidate_id", "generation"]).any()
    assert sorted(set(after["generation"])) == [0, 1]
