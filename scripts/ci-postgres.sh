#!/usr/bin/env bash
# Set up a local PostgreSQL for the storage/engine test suite (idempotent; run as root).
#
#   eval "$(scripts/ci-postgres.sh)"   # exports ASKHUMAN_TEST_POSTGRES_URL
#
# Installs PostgreSQL if missing, starts the default cluster, and creates the role
# `askhuman` (password `askhuman`, CREATEDB so tests can make one database per test)
# and the database `askhuman_test`. Diagnostics go to stderr; stdout is only the export.
set -euo pipefail

PGUSER_NAME=askhuman
PGPASS=askhuman
PGDB=askhuman_test
PGPORT="${PGPORT:-5432}"

log() { echo "ci-postgres: $*" >&2; }

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  log "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -y >&2
  apt-get install -y postgresql >&2
fi

version="$(ls /usr/lib/postgresql | sort -V | tail -n1)"
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$version main"; then
  log "creating cluster $version/main"
  pg_createcluster "$version" main --port "$PGPORT" >&2
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -q online; then
  log "starting cluster $version/main"
  pg_ctlcluster "$version" main start >&2
fi

psql_admin() { su postgres -c "psql -v ON_ERROR_STOP=1 -qAt -p $PGPORT $*"; }

for _ in $(seq 1 30); do
  psql_admin "-c 'select 1'" >/dev/null 2>&1 && break
  sleep 1
done

if [ "$(psql_admin "-c \"select 1 from pg_roles where rolname='$PGUSER_NAME'\"")" != "1" ]; then
  log "creating role $PGUSER_NAME"
  psql_admin "-c \"create role $PGUSER_NAME login createdb password '$PGPASS'\"" >&2
else
  psql_admin "-c \"alter role $PGUSER_NAME login createdb password '$PGPASS'\"" >&2
fi
if [ "$(psql_admin "-c \"select 1 from pg_database where datname='$PGDB'\"")" != "1" ]; then
  log "creating database $PGDB"
  psql_admin "-c \"create database $PGDB owner $PGUSER_NAME\"" >&2
fi

echo "export ASKHUMAN_TEST_POSTGRES_URL=postgresql+psycopg://$PGUSER_NAME:$PGPASS@127.0.0.1:$PGPORT/$PGDB"
