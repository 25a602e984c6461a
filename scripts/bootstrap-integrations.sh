#!/usr/bin/env bash
# Create .venv-integrations: the client package with every framework extra, and pytest.
# The frameworks stay out of the server's .venv (its dependencies stay lean); the tests
# start the server from .venv as a subprocess. Reinstalls only when a pin changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
venv=.venv-integrations
stamp=$venv/.installed
if [ ! -x $venv/bin/python ]; then
  "$PYTHON" -m venv $venv
fi
if [ ! -f "$stamp" ] || [ clients/python/pyproject.toml -nt "$stamp" ] \
    || [ clients/python/integrations-constraints.txt -nt "$stamp" ]; then
  started=$(date +%s)
  $venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  $venv/bin/python -m pip install --quiet -c clients/python/integrations-constraints.txt \
      -e "clients/python[langgraph,openai-agents,adk,pydantic-ai,a2a]" \
      "pytest>=8.3" "pytest-asyncio>=0.25" "pytest-timeout>=2.3" \
      2>&1 | grep -v '^WARNING: Location' || true
  $venv/bin/python -c "import askhuman_client, langgraph, langchain, agents, google.adk, a2a, pydantic_ai"
  echo "bootstrap-integrations: installed in $(( $(date +%s) - started )) s" >&2
  touch "$stamp"
fi
