#!/usr/bin/env bash
# End-to-end check of the deployment path on one machine, with the GPU simulator: start a Prefect server on
# loopback, create the process work pool, deploy everything in prefect.yaml, start a worker, trigger the
# `simulated` deployment of `evolve`, and wait for it to complete (its generations are flow runs of the
# `evolve-generation/generation` deployment, run by the same worker). Prints the flow run's final state; exits 0
# only if it completed and wrote its lineage. Retrying a failed generation on this set-up:
# tests/test_generation_retry.py. Usage: scripts/check_deployment.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-4247}"
source scripts/lib/prefect_loopback.sh
STORE="$WORK/store"

start_server
deploy_all
start_worker worker

"$BIN/prefect" deployment run evolve/simulated -p "store_root=$STORE" -p run=deployed --watch \
  --watch-timeout 900 >"$WORK/run.log" 2>&1 || true
tail -n 3 "$WORK/run.log"
if ! grep -q "Completed" "$WORK/run.log"; then
  echo "--- worker log"; tail -n 60 "$WORK/worker.log"; exit 1
fi
ROWS=$("$BIN/python" -c "from ksci.lineage.store import LineageStore; print(len(LineageStore('$STORE').read('deployed')))")
echo "the deployed run recorded $ROWS candidates"
[ "$ROWS" -gt 0 ]
