#!/usr/bin/env bash
# Claude Code (the npm package, pinned) into .claude-code/ (gitignored), for
# tests/api/test_claude_code_cli.py, which is skipped without it. It needs node and npm
# (Debian: apt-get install nodejs npm). The package brings its own native binary
# (~360 MB on disk); nothing is fetched from anywhere but the npm registry.
# The test runs it only in a network namespace with nothing but loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${CLAUDE_CODE_VERSION:-2.1.328}
bin=.claude-code/node_modules/.bin/claude
if [ -x "$bin" ] && grep -q "\"version\": \"$VERSION\"" \
    .claude-code/node_modules/@anthropic-ai/claude-code/package.json 2>/dev/null; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed to install Claude Code (apt-get install nodejs npm)" >&2
  exit 1
fi
npm install --prefix .claude-code --no-audit --no-fund --no-save --loglevel=error \
  "@anthropic-ai/claude-code@$VERSION"
test -x "$bin"
echo "Claude Code $VERSION in $bin"
