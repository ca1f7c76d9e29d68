#!/bin/bash
# The first start makes the cluster (superuser POSTGRES_USER, password auth over TCP) and the
# database POSTGRES_DB; every start then runs the server in the foreground.
set -euo pipefail
: "${PGDATA:=/var/lib/postgresql/data}" "${POSTGRES_USER:=postgres}"
socket_dir=/var/run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:?}") \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl --pgdata="$PGDATA" --wait --silent -o "-c listen_addresses='' -c unix_socket_directories=$socket_dir" start
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    createdb --host="$socket_dir" --username="$POSTGRES_USER" "$POSTGRES_DB"
  fi
  pg_ctl --pgdata="$PGDATA" --wait --silent stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories="$socket_dir"
