# Sourced by scripts/check_*.sh (after `cd` to the project root and setting PORT): a throwaway Prefect server
# on loopback with the process work pool and prefect.yaml deployed, and workers polling that pool. Everything
# lives in a temp folder, $WORK; an EXIT trap stops the workers (SIGINT, as Prefect asks) before the server
# and removes $WORK (KSCI_KEEP_WORK=1 keeps it for a look at the logs).
BIN="${KSCI_BIN:-.venv/bin}"
WORK="$(mktemp -d)"
export PREFECT_HOME="$WORK/prefect" PREFECT_API_URL="http://127.0.0.1:$PORT/api" KSCI_PROJECT_DIR="$PWD"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PREFECT_RESULTS_PERSIST_BY_DEFAULT=true
# A server on SQLite answers 503 while its database is busy; on a loaded 2-core CI machine a busy spell outlasted
# the client's five retries (about a minute) and failed a flow run. Seven wait up to about four minutes
# (docs/deployment.md); a value in the environment wins.
export PREFECT_CLIENT_MAX_RETRIES="${PREFECT_CLIENT_MAX_RETRIES:-7}"
# GPU lock files (ksci/devices.py) of this check's own: its simulated GPUs "0", "1" are then not the host's.
export KSCI_GPU_LOCK_DIR="$WORK/gpu-locks"
SERVER=""
WORKERS=()

stop_loopback() {
  local pid alive
  for pid in "${WORKERS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  # A worker that has not exited 10 s after SIGINT is killed with its flow-run processes (its process group).
  for _ in $(seq 20); do
    alive=0
    for pid in "${WORKERS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for pid in "${WORKERS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  if [ -n "$SERVER" ]; then kill -TERM -- "-$SERVER" 2>/dev/null || true; fi
  sleep 1
  if [ -z "${KSCI_KEEP_WORK:-}" ]; then rm -rf "$WORK"; fi
}
trap stop_loopback EXIT

# Start `prefect server start` on 127.0.0.1:$PORT and wait (at most 120 s) until it answers /api/health.
start_server() {
  setsid "$BIN/prefect" server start --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 120); do
    curl -fs "http://127.0.0.1:$PORT/api/health" >/dev/null 2>&1 && break
    sleep 1
  done
  curl -fs "http://127.0.0.1:$PORT/api/health" >/dev/null || { cat "$WORK/server.log"; exit 1; }
  echo "server healthy on port $PORT"
}

# Create the process work pool ksci-gpu and deploy everything in prefect.yaml to it.
deploy_all() {
  "$BIN/prefect" work-pool create ksci-gpu --type process --overwrite >/dev/null
  "$BIN/prefect" --no-prompt deploy --all >"$WORK/deploy.log" 2>&1 || { cat "$WORK/deploy.log"; exit 1; }
  # Counted through the REST API: a `prefect deployment ls` costs a Prefect import (about 4 CPU s) for one line.
  local count
  count=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{}' "$PREFECT_API_URL/deployments/count" || echo "?")
  echo "deployed: $count deployments on the server"
}

# start_worker LOG [ARGS...]: a worker on the pool, logging to $WORK/LOG.log; ARGS go to `prefect worker start`.
# A script's background jobs inherit SIGINT as ignored, and the worker's SIGINT handler forwards to the ignored
# handler, so it would never stop on SIGINT: `env --default-signal=INT` gives it the default back.
start_worker() {
  local log="$1"
  shift
  setsid env --default-signal=INT "$BIN/prefect" worker start --pool ksci-gpu "$@" >"$WORK/$log.log" 2>&1 &
  WORKERS+=($!)
}
