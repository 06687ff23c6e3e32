#!/usr/bin/env bash
# Several workers on one work pool, several evolutions at once, one shared lineage store: the set-up of
# docs/deployment.md (one worker per GPU host) squeezed onto one machine over loopback, with the GPU simulator.
# Starts a Prefect server, deploys prefect.yaml, starts WORKERS workers that share one folder of GPU lock files
# as a host's workers do (`--limit 3`: an evolution holds one of its worker's slots while its generations, flow
# runs of their own, run on any worker, so the slots must outnumber the evolutions: 9 for 6), triggers RUNS runs of
# evolve/simulated at once (each its own `run`, all the same store_root, `gpus` 0 and 1) and waits for them,
# at most KSCI_RUNS_TIMEOUT seconds (900 by default). Prints each flow run's final state and the worker that ran
# it, then what the store holds: the rows of every part file and how many distinct (run, candidate_id,
# generation) keys among them.
# Exits 0 only if every flow run completed and no row was written twice.
# Usage: scripts/check_multi_worker.sh [PORT] [WORKERS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-4271}"
WORKERS_WANTED="${2:-3}"
RUNS="${3:-6}"
source scripts/lib/prefect_loopback.sh
STORE="$WORK/store"

start_server
deploy_all
for i in $(seq "$WORKERS_WANTED"); do
  start_worker "worker-$i" --name "worker-$i" --limit 3
done
# Trigger only once every worker polls the pool, so that the runs can spread over all of them.
for _ in $(seq 120); do
  [ "$(grep -l "started!" "$WORK"/worker-*.log 2>/dev/null | wc -l)" -ge "$WORKERS_WANTED" ] && break
  sleep 1
done
echo "$(grep -l "started!" "$WORK"/worker-*.log | wc -l) workers polling the pool"

NAMES=()
TRIGGERS=()
for i in $(seq "$RUNS"); do
  NAMES+=("multi-$i")
  "$BIN/prefect" deployment run evolve/simulated --flow-run-name "multi-$i" \
    -p "store_root=$STORE" -p "run=multi-$i" -p 'gpus=["0","1"]' >"$WORK/trigger-$i.log" 2>&1 &
  TRIGGERS+=($!)
done
for pid in "${TRIGGERS[@]}"; do wait "$pid" || { cat "$WORK"/trigger-*.log; exit 1; }; done
echo "triggered ${#NAMES[@]} runs of evolve/simulated"

STATUS=0
"$BIN/python" scripts/lib/report_runs.py "${KSCI_RUNS_TIMEOUT:-900}" "$STORE" "${NAMES[@]}" || STATUS=$?
if [ "$STATUS" != 0 ]; then
  for log in "$WORK"/worker-*.log; do echo "--- $log"; tail -n 40 "$log"; done
fi
exit "$STATUS"
