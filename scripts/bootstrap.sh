#!/usr/bin/env bash
# Create .venv and install askhuman with its test tools, from pyproject.toml only.
# Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.installed
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
    || [ clients/python/pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install --quiet -e ".[test]" 2>&1 | grep -v '^WARNING: Location' || true
  # the client package (its own pyproject.toml), so `make test` runs tests/clients
  .venv/bin/python -m pip install --quiet -e clients/python 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -c "import bot, renderers, storage, askhuman_client" # fail loudly if the install did not work
  touch "$stamp"
fi
