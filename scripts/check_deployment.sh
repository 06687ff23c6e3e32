#!/usr/bin/env bash
# End-to-end check of the deployment path on one machine, with the GPU simulator: start a Prefect server on
# loopback, create the process work pool, deploy everything in prefect.yaml, start a worker, trigger the
# `simulated` deployment of `evolve`, and wait for it to complete. Prints the flow run's final state; exits 0
# only if it completed and wrote its lineage. Usage: scripts/check_deployment.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-4247}"
BIN="${KSCI_BIN:-.venv/bin}"
WORK="$(mktemp -d)"
export PREFECT_HOME="$WORK/prefect" PREFECT_API_URL="http://127.0.0.1:$PORT/api" KSCI_PROJECT_DIR="$PWD"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PREFECT_RESULTS_PERSIST_BY_DEFAULT=true
STORE="$WORK/store"
cleanup() {
  [ -n "${WORKER:-}" ] && kill -INT "$WORKER" 2>/dev/null && sleep 2
  [ -n "${WORKER:-}" ] && kill -KILL -- "-$WORKER" 2>/dev/null
  [ -n "${SERVER:-}" ] && kill -TERM -- "-$SERVER" 2>/dev/null
  sleep 1
  [ -n "${KSCI_KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

setsid "$BIN/prefect" server start --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 120); do
  curl -fs "http://127.0.0.1:$PORT/api/health" >/dev/null 2>&1 && break
  sleep 1
done
curl -fs "http://127.0.0.1:$PORT/api/health" >/dev/null || { cat "$WORK/server.log"; exit 1; }
echo "server healthy on port $PORT"

"$BIN/prefect" work-pool create ksci-gpu --type process --overwrite >/dev/null
"$BIN/prefect" --no-prompt deploy --all >"$WORK/deploy.log" 2>&1 || { cat "$WORK/deploy.log"; exit 1; }
echo "deployed: $("$BIN/prefect" deployment ls 2>/dev/null | grep -c 'evolve\|rebench') deployments listed"

setsid "$BIN/prefect" worker start --pool ksci-gpu >"$WORK/worker.log" 2>&1 &
WORKER=$!

"$BIN/prefect" deployment run evolve/simulated -p "store_root=$STORE" -p run=deployed --watch \
  --watch-timeout 900 >"$WORK/run.log" 2>&1 || true
tail -n 3 "$WORK/run.log"
if ! grep -q "Completed" "$WORK/run.log"; then
  echo "--- worker log"; tail -n 60 "$WORK/worker.log"; exit 1
fi
ROWS=$("$BIN/python" -c "from ksci.lineage import LineageStore; print(len(LineageStore('$STORE').read('deployed')))")
echo "the deployed run recorded $ROWS candidates"
[ "$ROWS" -gt 0 ]
