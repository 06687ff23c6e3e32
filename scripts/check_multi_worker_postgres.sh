#!/usr/bin/env bash
# scripts/check_multi_worker.sh with its Prefect server on PostgreSQL instead of SQLite: the set-up that
# docs/deployment.md recommends for several GPU hosts, since a server on SQLite answers requests with 503 when
# its database is busy, as docs/results.md measured with several GPUs. Starts a throwaway PostgreSQL cluster
# (scripts/lib/postgres.sh: as root it runs as `nobody`), points PREFECT_API_DATABASE_CONNECTION_URL at it,
# runs the multi-worker check, then prints what the server's database holds (`postgresql: N flow runs in the
# server's database, M of the R triggered runs completed`), which shows that the server kept its state there.
# Exits with the multi-worker check's status, or 1 if the database does not hold every triggered run completed.
# Usage: scripts/check_multi_worker_postgres.sh [PORT] [WORKERS] [RUNS]   (as scripts/check_multi_worker.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${KSCI_BIN:-.venv/bin}"
source scripts/lib/postgres.sh

start_postgres
RUNS="${3:-6}"
STATUS=0
bash scripts/check_multi_worker.sh "${1:-4272}" "${2:-3}" "$RUNS" || STATUS=$?
TOTAL="$(psql_prefect 'select count(*) from flow_run')"
TRIGGERED="$(psql_prefect "select count(*) from flow_run where name ~ '^multi-[0-9]+$' and state_type = 'COMPLETED'")"
echo "postgresql: $TOTAL flow runs in the server's database, $TRIGGERED of the $RUNS triggered runs completed"
if [ "$STATUS" = 0 ] && [ "$TRIGGERED" != "$RUNS" ]; then STATUS=1; fi
exit "$STATUS"
