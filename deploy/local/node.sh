#!/usr/bin/env bash
# deploy/local/node.sh - Node.js for the project's npm tools (the API linter, deploy/lint).
#
#   bash deploy/local/node.sh [up]   # make sure a Node.js >= NODE_MIN and npm are there, idempotent
#   bash deploy/local/node.sh path   # the same (its messages on stderr), then print the node to run
#
# The machine's node when it is NODE_MIN or newer (these machines have Node.js 20). Otherwise:
# npm from Debian's packages (nodejs, npm) when npm is missing, then Node.js NODE_PINNED from
# the npm registry's node-linux-<arch> package, under .data/tools (Debian bookworm's nodejs is
# 18, older than the linter supports). Run as root when a Debian package is missing.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
LOG_DIR="$REPO_ROOT/.data/logs"
NODE_MIN="20.19.0"     # @redocly/cli 2.x: Node.js 20.19+ or 22.12+
NODE_PINNED="22.23.5"  # the fallback, when the machine's node is missing or older
NODE_DIR="$REPO_ROOT/.data/tools/node-$NODE_PINNED"

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

MODE="${1:-up}"
if [[ "$MODE" == path ]]; then exec 3>&1 1>&2; fi

# shellcheck source=steps.sh
. "$SCRIPT_DIR/steps.sh"

# at_least VERSION MIN: VERSION (x.y.z) is MIN or newer.
at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]; }
node_version() { "$1" --version 2>/dev/null | sed 's/^v//'; }

need_npm() {
  step "npm (Debian's nodejs and npm when missing)"
  if command -v npm >/dev/null; then
    info "npm $(npm --version 2>/dev/null || echo '?') at $(command -v npm)"
    return
  fi
  [[ $EUID -eq 0 ]] || die "npm is missing: apt-get install nodejs npm (as root), or run this script as root"
  info "apt-get update; apt-get install nodejs npm"
  run_logged apt apt-get -q -o DPkg::Lock::Timeout=300 update || die "apt-get update failed"
  run_logged apt apt-get install "${APT_OPTS[@]}" --no-install-recommends nodejs npm \
    || die "apt-get install nodejs npm failed"
  command -v npm >/dev/null || die "npm missing after apt-get install npm"
}

# pinned_node installs Node.js NODE_PINNED from the npm registry (the binary ships in the
# node-linux-<arch> package) into NODE_DIR, once.
pinned_node() {
  local arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) die "no node-linux package for $(uname -m)" ;;
  esac
  step "Node.js $NODE_PINNED (npm package node-linux-$arch) in ${NODE_DIR#"$REPO_ROOT"/}"
  if [[ "$(node_version "$NODE_DIR/bin/node")" == "$NODE_PINNED" ]]; then
    info "already installed"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  run_logged node npm install --prefix "$tmp" --no-save --no-audit --no-fund --ignore-scripts "node-linux-$arch@$NODE_PINNED" \
    || die "npm install node-linux-$arch@$NODE_PINNED failed"
  [[ -x "$tmp/node_modules/node-linux-$arch/bin/node" ]] || die "node-linux-$arch@$NODE_PINNED has no bin/node"
  rm -rf "$NODE_DIR"
  mkdir -p "$(dirname "$NODE_DIR")"
  mv "$tmp/node_modules/node-linux-$arch" "$NODE_DIR"
  [[ "$(node_version "$NODE_DIR/bin/node")" == "$NODE_PINNED" ]] || die "$NODE_DIR/bin/node does not run"
}

step "Node.js >= $NODE_MIN"
node=""
if command -v node >/dev/null && at_least "$(node_version node)" "$NODE_MIN"; then
  node=$(command -v node)
  info "node $(node_version node) at $node"
  need_npm
else
  info "the machine's node is $(if command -v node >/dev/null; then echo "$(node_version node), too old"; else echo missing; fi)"
  need_npm
  pinned_node
  node="$NODE_DIR/bin/node"
fi
if [[ "$MODE" == path ]]; then echo "$node" >&3; fi
