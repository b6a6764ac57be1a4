#!/usr/bin/env bash
# deploy/lint/api-lint.sh - `make api-lint`: Redocly CLI, pinned by package-lock.json beside
# this script, lints every service's OpenAPI document as served (docs/openapi/*.json, from
# `make generate`) and the AsyncAPI document (docs/asyncapi.json) with redocly.yaml's rules.
#
# Node.js comes from deploy/local/node.sh. The linter is installed with `npm ci` into
# .data/tools/api-lint (gitignored), and again only when package-lock.json changes.
set -Eeuo pipefail

LINT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$LINT_DIR/../.." && pwd)
LOG_DIR="$REPO_ROOT/.data/logs"
TOOL_DIR="$REPO_ROOT/.data/tools/api-lint"

# shellcheck source=../local/steps.sh
. "$REPO_ROOT/deploy/local/steps.sh"

node=$(bash "$REPO_ROOT/deploy/local/node.sh" path)

step "Redocly CLI (npm ci from deploy/lint/package-lock.json)"
stamp="$TOOL_DIR/node_modules/.agora-package-lock.json"
if cmp -s "$LINT_DIR/package-lock.json" "$stamp"; then
  info "up to date"
else
  rm -rf "$TOOL_DIR"
  mkdir -p "$TOOL_DIR"
  cp "$LINT_DIR/package.json" "$LINT_DIR/package-lock.json" "$TOOL_DIR/"
  # npm runs on the node chosen above, whichever node its own script names.
  PATH="$(dirname "$node"):$PATH" run_logged api-lint npm ci --prefix "$TOOL_DIR" --no-audit --no-fund --ignore-scripts \
    || die "npm ci failed"
  cp "$LINT_DIR/package-lock.json" "$stamp"
fi
cli="$TOOL_DIR/node_modules/@redocly/cli/bin/cli.js"
info "redocly $("$node" "$cli" --version 2>/dev/null)"

step "redocly lint docs/openapi/*.json docs/asyncapi.json"
cd "$REPO_ROOT"
# No usage data sent, no check for a newer version: the pin decides.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$node" "$cli" lint --config deploy/lint/redocly.yaml --format stylish docs/openapi/*.json docs/asyncapi.json
