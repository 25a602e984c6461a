#!/usr/bin/env bash
# The full test suite: SQLite always, PostgreSQL too when one is reachable.
#
# As root on Debian/Ubuntu this installs and starts a local PostgreSQL itself
# (scripts/ci-postgres.sh). Otherwise point ASKHUMAN_TEST_POSTGRES_URL at a server,
# e.g. postgresql+psycopg://askhuman:askhuman@127.0.0.1:5432/askhuman_test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
if [ -z "${ASKHUMAN_TEST_POSTGRES_URL:-}" ] && [ "$(id -u)" = 0 ]; then
  eval "$(scripts/ci-postgres.sh)"
fi
# Claude Code (npm) for the real --permission-prompt-tool test; skipped without npm
if command -v npm >/dev/null 2>&1; then
  scripts/install-claude-code.sh >/dev/null || echo "note: Claude Code did not install; its test is skipped." >&2
else
  echo "note: npm is missing; the real Claude Code test is skipped (apt-get install nodejs npm)." >&2
fi
if [ -z "${ASKHUMAN_TEST_POSTGRES_URL:-}" ]; then
  echo "note: ASKHUMAN_TEST_POSTGRES_URL is not set; PostgreSQL tests will be skipped." >&2
fi
# Two workers (pytest-xdist): most tests wait on sockets and subprocesses, so the
# suite takes about half the time even on two cores. ASKHUMAN_TEST_WORKERS=0 runs it in
# this one process (e.g. to debug a test).
exec .venv/bin/pytest -n "${ASKHUMAN_TEST_WORKERS:-2}" "$@"
