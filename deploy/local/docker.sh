#!/usr/bin/env bash
# deploy/local/docker.sh - a container engine for compose on this machine (idempotent).
#
#   bash deploy/local/docker.sh [up]    # install/start dockerd, install the compose plugin (default)
#   bash deploy/local/docker.sh status  # report what is there, change nothing
#   bash deploy/local/docker.sh stop    # stop the dockerd this script started
#
# 1. Engine: Debian's docker.io (20.10, API 1.41) when dockerd is missing.
# 2. dockerd in the background (log .data/logs/dockerd.log) when `docker info`
#    does not answer; the machine has no init system to start it.
# 3. Compose v2 as the `docker compose` CLI plugin, pinned, built with
#    `go install` from its Go module: Debian only has docker-compose 1.x, and no
#    release binary can be downloaded here.
# deploy/local/infra.sh runs this as its `docker` step (skip with INFRA_SKIP=docker).
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
DATA_DIR="$REPO_ROOT/.data"
LOG_DIR="$DATA_DIR/logs"
STATE_DIR="${INFRA_STATE_DIR:-$DATA_DIR/infra}"
DOCKERD_LOG="$LOG_DIR/dockerd.log"
DOCKERD_PIDFILE="$DATA_DIR/dockerd.pid"

# v2.35.0 is the newest Compose v2 that go install accepts: from v2.35.1 on, go.mod has an
# exclude directive (as v2.24.3-v2.25.0 had), and go install refuses replace and exclude
# directives. It builds with this machine's Go and still speaks to engines older than API
# 1.44 (Debian's 20.10 is 1.41): it connects extra networks after create, not at create.
COMPOSE_MODULE="github.com/docker/compose/v2"
COMPOSE_VERSION="${INFRA_COMPOSE_VERSION:-v2.35.0}"
# The docker CLI (28.x in /usr/local/bin, or Debian's 20.10 in /usr/bin) searches this
# directory for plugins.
PLUGIN_DIR="${DOCKER_CLI_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}"
COMPOSE_PLUGIN="$PLUGIN_DIR/docker-compose"
INFRA_GO_BUILD_P="${INFRA_GO_BUILD_P:-1}"

export DEBIAN_FRONTEND=noninteractive
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# shellcheck source=steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"

engine_up() { timeout 10 docker info >/dev/null 2>&1; }
dockerd_pid() {
  local pid
  pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ && "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == dockerd ]] || return 1
  echo "$pid"
}
# The module version compiled into the plugin (empty when missing or not built by go install).
compose_built_version() {
  [[ -x "$COMPOSE_PLUGIN" ]] || return 0
  go version -m "$COMPOSE_PLUGIN" 2>/dev/null | awk -v m="$COMPOSE_MODULE" '$1 == "mod" && $2 == m {print $3}' || true
}

do_engine() {
  step "Docker: engine (dockerd)"
  if command -v dockerd >/dev/null; then
    info "installed: $(dockerd --version 2>/dev/null || echo '?')"
  else
    info "apt-get update"
    run_logged apt apt-get -q -o DPkg::Lock::Timeout=300 update || die "apt-get update failed"
    info "apt-get install docker.io (Debian's engine; log $LOG_DIR/apt.log)"
    run_logged apt apt-get install "${APT_OPTS[@]}" --no-install-recommends docker.io \
      || die "apt-get install docker.io failed"
    command -v dockerd >/dev/null || die "docker.io is installed but dockerd is not in PATH"
  fi
  command -v docker >/dev/null || die "no docker CLI in PATH"

  step "Docker: daemon answering (docker info)"
  if engine_up; then
    info "already running"
  else
    local pid i
    if pid=$(dockerd_pid); then
      info "dockerd (pid $pid) is starting; waiting for it"
    else
      info "starting dockerd in the background (log $DOCKERD_LOG)"
      echo "---- $(date -Is) starting dockerd" >>"$DOCKERD_LOG"
      setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
      echo $! >"$DOCKERD_PIDFILE"
      disown || true
    fi
    for ((i = 0; i < 60; i++)); do
      engine_up && break
      if ! dockerd_pid >/dev/null; then
        tail -n 20 "$DOCKERD_LOG" >&2
        die "dockerd exited during start-up (log $DOCKERD_LOG)"
      fi
      sleep 1
    done
    ((i < 60)) || die "docker info did not answer within 60 s (log $DOCKERD_LOG)"
  fi
  info "$(docker version -f 'engine {{.Server.Version}} (API {{.Server.APIVersion}}), CLI {{.Client.Version}}' 2>/dev/null || echo '?'), storage $(docker info -f '{{.Driver}}' 2>/dev/null || echo '?')"
}

do_compose() {
  step "Docker: compose plugin $COMPOSE_VERSION ($COMPOSE_PLUGIN)"
  command -v go >/dev/null || die "go not found in PATH (needed to build compose)"
  local built tmp t0
  built=$(compose_built_version)
  if [[ "$built" == "$COMPOSE_VERSION" ]]; then
    info "already built"
  else
    [[ -n "$built" ]] && info "found $built, want $COMPOSE_VERSION: rebuilding"
    [[ -z "$built" && -e "$COMPOSE_PLUGIN" ]] && info "replacing $COMPOSE_PLUGIN (not a go install build of $COMPOSE_MODULE)"
    info "go install $COMPOSE_MODULE/cmd@$COMPOSE_VERSION"
    info "the first build takes several minutes (log $LOG_DIR/compose-build.log)"
    tmp="$STATE_DIR/compose-bin"
    rm -rf "$tmp" && mkdir -p "$tmp" "$PLUGIN_DIR"
    t0=$SECONDS
    # -X internal.Version: what `docker compose version` prints (the upstream Makefile sets it too).
    run_logged compose-build env CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmp" \
      GOFLAGS="${GOFLAGS:-} -p=$INFRA_GO_BUILD_P" \
      nice -n 10 go install -trimpath \
      -ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
      "$COMPOSE_MODULE/cmd@$COMPOSE_VERSION" || die "go install $COMPOSE_MODULE/cmd@$COMPOSE_VERSION failed"
    [[ -x "$tmp/cmd" ]] || die "go install produced no $tmp/cmd"
    install -m 0755 "$tmp/cmd" "$COMPOSE_PLUGIN"
    rm -rf "$tmp"
    built=$(compose_built_version)
    [[ "$built" == "$COMPOSE_VERSION" ]] || die "installed plugin reports '$built', expected $COMPOSE_VERSION"
    info "built in $((SECONDS - t0)) s"
  fi
  local v
  v=$(docker compose version --short 2>&1) || die "docker compose version failed: $v"
  [[ "v${v#v}" == "$COMPOSE_VERSION" ]] || die "docker compose version says '$v', expected $COMPOSE_VERSION (another plugin earlier in the CLI's search path?)"
  info "docker compose version: $v"
}

summary() {
  CURRENT_STEP="summary"
  local e c
  e=$(timeout 10 docker version -f '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null) && e="$e [up]" || e="[DOWN]"
  c=$(timeout 10 docker compose version --short 2>/dev/null || echo missing)
  printf '  %-11s %-42s %s\n' "Docker" "$e" "compose $c"
}

cmd_up() {
  local t0=$SECONDS
  [[ $EUID -eq 0 ]] || die "run as root (apt-get, dockerd, $PLUGIN_DIR)"
  mkdir -p "$LOG_DIR" "$STATE_DIR"
  do_engine
  do_compose
  echo "==> docker ready in $((SECONDS - t0)) s"
}

cmd_stop() {
  step "Docker: stop dockerd (pidfile $DOCKERD_PIDFILE)"
  local pid i
  if pid=$(dockerd_pid); then
    kill "$pid"
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) still running after 30 s"
    info "stopped pid $pid"
  else
    info "no dockerd started by this script is running"
  fi
  rm -f "$DOCKERD_PIDFILE"
}

case "${1:-up}" in
  up) cmd_up ;;
  stop) cmd_stop ;;
  status) summary ;;
  -h|--help|help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: $0 [up|status|stop]" >&2; exit 2 ;;
esac
