# Sourced by scripts/check_*_postgres.sh (after `cd` to the project root): a throwaway PostgreSQL cluster for a
# Prefect server, on 127.0.0.1 at a free port, in a temp folder of its own, $PG_WORK, removed on exit (an EXIT trap
# stops the cluster first; KSCI_KEEP_WORK=1 keeps the folder). start_postgres exports
# PREFECT_API_DATABASE_CONNECTION_URL (asyncpg, which the lock has), so every Prefect server started after it, in
# this shell or its children, keeps its state there instead of in SQLite.
#
# PostgreSQL's binaries: KSCI_PG_BIN, else the newest /usr/lib/postgresql/*/bin (Debian's `postgresql` package,
# which `make setup` installs), else initdb on PATH. initdb and postgres refuse to run as root, so as root the
# cluster runs as KSCI_PG_USER (default `nobody`, which every Debian has) through runuser; authentication is
# `trust` on loopback only, which is fine for a cluster that lives as long as one check.
PG_BIN="${KSCI_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
if [ -z "$PG_BIN" ] && command -v initdb >/dev/null; then PG_BIN="$(dirname "$(command -v initdb)")"; fi
PG_WORK=""
PG_DATA=""

# Run a PostgreSQL server binary as a user it accepts.
as_pg_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "${KSCI_PG_USER:-nobody}" -- "$@"
  else
    "$@"
  fi
}

stop_postgres() {
  if [ -n "$PG_DATA" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
    as_pg_user "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ -n "$PG_WORK" ] && [ -z "${KSCI_KEEP_WORK:-}" ]; then rm -rf "$PG_WORK"; fi
}

# A new cluster with a database `prefect` owned by the superuser `ksci`; prints one line when it answers.
start_postgres() {
  if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
    echo "no PostgreSQL here (no initdb): apt-get install postgresql, or set KSCI_PG_BIN" >&2
    exit 1
  fi
  PG_WORK="$(mktemp -d -p /tmp ksci-postgres.XXXXXX)"  # not $TMPDIR: the cluster's user must reach it
  PG_DATA="$PG_WORK/data"
  trap stop_postgres EXIT
  trap 'exit 143' TERM  # so that a stopped check runs the EXIT trap and leaves no cluster behind
  trap 'exit 130' INT
  if [ "$(id -u)" = 0 ]; then chown "${KSCI_PG_USER:-nobody}" "$PG_WORK"; fi
  PG_PORT="$("$BIN/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  as_pg_user "$PG_BIN/initdb" -D "$PG_DATA" -U ksci --auth=trust -E UTF8 >"$PG_WORK/initdb.log" 2>&1 ||
    { cat "$PG_WORK/initdb.log"; exit 1; }
  # Durability off (fsync, synchronous_commit): the cluster is thrown away with the check.
  as_pg_user "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_WORK/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_WORK -c fsync=off -c synchronous_commit=off" >/dev/null ||
    { cat "$PG_WORK/postgres.log"; exit 1; }
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U ksci prefect
  export PREFECT_API_DATABASE_CONNECTION_URL="postgresql+asyncpg://ksci@127.0.0.1:$PG_PORT/prefect"
  echo "postgresql $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT, database prefect"
}

# psql_prefect SQL: run SQL in the database `prefect`, unaligned, no header.
psql_prefect() {
  "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U ksci -d prefect -At -c "$1"
}
