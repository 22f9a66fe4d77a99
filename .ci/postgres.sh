#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the results store's tests (tests/test_store.py).
#   bash .ci/postgres.sh start [DIR]   installs Debian's postgresql if missing (apt-get), makes a
#                                      cluster in DIR (default /tmp/matrixrun-pg), starts it on
#                                      127.0.0.1:$PG_PORT (55432) and prints its URL
#   bash .ci/postgres.sh stop [DIR]    stops it
# Trust authentication on loopback only: the cluster holds nothing but test data and is removed
# on the next start. As root, the server runs as the postgres user (initdb refuses root).
set -euo pipefail
ACTION=${1:?start or stop}
DIR=${2:-/tmp/matrixrun-pg}
PORT=${PG_PORT:-55432}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bin_dir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

case "$ACTION" in
  start)
    if [ -z "$(bin_dir)" ]; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    BIN=$(bin_dir)
    if [ -f "$DIR/data/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null || true; fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR"; fi
    as_owner "$BIN/initdb" -D "$DIR/data" -A trust -U postgres >"$DIR/initdb.log"
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR -c fsync=off" start >/dev/null
    as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres matrixrun_test
    echo "postgresql://postgres@127.0.0.1:$PORT/matrixrun_test"
    ;;
  stop)
    BIN=$(bin_dir)
    if [ -n "$BIN" ] && [ -f "$DIR/data/postmaster.pid" ]; then
      as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null
    fi
    ;;
  *) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
