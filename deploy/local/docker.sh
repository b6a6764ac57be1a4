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
# 3. Compose v2 as the `docker compose` CLI plugin: bookworm only has docker-compose 1.x,
#    and no release binary can be downloaded here. By default the binary of Debian trixie's
#    docker-compose package (COMPOSE_DEB_VERSION; a Go program that needs only libc 2.34),
#    downloaded with a private apt configuration (the system's sources and package database
#    are untouched) and unpacked into the plugin directory: ~13 MB, seconds. When trixie no
#    longer offers that version, or with INFRA_COMPOSE_FROM=source, it is compiled instead
#    with `go install` of COMPOSE_VERSION (several minutes on 2 cores).
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
# Debian trixie's docker-compose (upstream version; the Debian revision may move). Like
# v2.35.0 it speaks to the 20.10 engine (API 1.41): extra networks are connected after create.
COMPOSE_DEB_SUITE=trixie
COMPOSE_DEB_VERSION="${INFRA_COMPOSE_DEB_VERSION:-2.26.1}"
INFRA_COMPOSE_FROM="${INFRA_COMPOSE_FROM:-debian}"   # debian | source
# The docker CLI (28.x in /usr/local/bin, or Debian's 20.10 in /usr/bin) searches this
# directory for plugins.
PLUGIN_DIR="${DOCKER_CLI_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}"
COMPOSE_PLUGIN="$PLUGIN_DIR/docker-compose"
# go install parallelism (-p) of the compose build; default: every core (nice -n 10 all the same).
INFRA_GO_BUILD_P="${INFRA_GO_BUILD_P:-$(nproc)}"

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

# compose_version: what the installed plugin says, as x.y.z (no v, no Debian revision such
# as the -4 of 2.26.1-4), empty when there is none.
compose_version() {
  [[ -x "$COMPOSE_PLUGIN" ]] || return 0
  local v; v=$(docker compose version --short 2>/dev/null || true)
  v=${v#v}
  echo "${v%%-*}"
}

# compose_from_debian: unpack the plugin of trixie's docker-compose package; returns 1 when
# that suite does not offer COMPOSE_DEB_VERSION (the caller then builds from source).
compose_from_debian() {
  local apt_dir="$STATE_DIR/apt-$COMPOSE_DEB_SUITE-bin" mirror deb ver tmp t0=$SECONDS
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n "$mirror" ]] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
    /etc/apt/sources.list 2>/dev/null || true)
  [[ -n "$mirror" ]] || { info "cannot read the Debian mirror URI from /etc/apt/sources.list(.d)"; return 1; }
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/dl"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $COMPOSE_DEB_SUITE main" >"$apt_dir/sources.list"
  : >>"$apt_dir/status"
  # A private apt: its own sources, lists, cache and (empty) package database, so nothing of
  # trixie reaches the system's apt; only the package file is fetched, never installed.
  local apt_priv=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
                  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
                  -o "Dir::State::status=$apt_dir/status" -o "APT::Sandbox::User=root"
                  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
                  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
                  -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
                  -o DPkg::Lock::Timeout=300)
  info "apt-get update (private, $COMPOSE_DEB_SUITE binary packages only, state in $apt_dir)"
  run_logged compose-deb apt-get -q "${apt_priv[@]}" update || { info "private apt-get update failed (log $LOG_DIR/compose-deb.log)"; return 1; }
  ver=$(apt-cache "${apt_priv[@]}" show --no-all-versions docker-compose 2>/dev/null | awk '$1 == "Version:" {print $2; exit}' || true)
  if [[ "${ver%%-*}" != "$COMPOSE_DEB_VERSION" ]]; then
    info "$COMPOSE_DEB_SUITE offers docker-compose '${ver:-none}', not $COMPOSE_DEB_VERSION"
    return 1
  fi
  info "apt-get download docker-compose=$ver ($COMPOSE_DEB_SUITE)"
  rm -f "$apt_dir/dl"/*.deb
  (cd "$apt_dir/dl" && run_logged compose-deb apt-get -q "${apt_priv[@]}" download "docker-compose=$ver") \
    || { info "apt-get download failed (log $LOG_DIR/compose-deb.log)"; return 1; }
  deb=$(ls "$apt_dir"/dl/docker-compose_*.deb 2>/dev/null | head -n1)
  tmp="$STATE_DIR/compose-deb"
  rm -rf "$tmp" && mkdir -p "$tmp" "$PLUGIN_DIR"
  dpkg-deb -x "$deb" "$tmp" || die "dpkg-deb -x $deb failed"
  [[ -x "$tmp/usr/libexec/docker/cli-plugins/docker-compose" ]] \
    || die "$deb has no usr/libexec/docker/cli-plugins/docker-compose: $(dpkg-deb -c "$deb" | awk '{print $6}' | grep -m3 compose | tr '\n' ' ')"
  install -m 0755 "$tmp/usr/libexec/docker/cli-plugins/docker-compose" "$COMPOSE_PLUGIN"
  rm -rf "$tmp" "$apt_dir/dl"/*.deb
  info "installed from $(basename "$deb") in $((SECONDS - t0)) s"
}

compose_from_source() {
  local tmp t0=$SECONDS
  info "go install $COMPOSE_MODULE/cmd@$COMPOSE_VERSION (-p $INFRA_GO_BUILD_P)"
  info "the first build takes several minutes (log $LOG_DIR/compose-build.log)"
  tmp="$STATE_DIR/compose-bin"
  rm -rf "$tmp" && mkdir -p "$tmp" "$PLUGIN_DIR"
  # -X internal.Version: what `docker compose version` prints (the upstream Makefile sets it too).
  run_logged compose-build env CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmp" \
    GOFLAGS="${GOFLAGS:-} -p=$INFRA_GO_BUILD_P" \
    nice -n 10 go install -trimpath \
    -ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
    "$COMPOSE_MODULE/cmd@$COMPOSE_VERSION" || die "go install $COMPOSE_MODULE/cmd@$COMPOSE_VERSION failed"
  [[ -x "$tmp/cmd" ]] || die "go install produced no $tmp/cmd"
  install -m 0755 "$tmp/cmd" "$COMPOSE_PLUGIN"
  rm -rf "$tmp"
  [[ "$(compose_built_version)" == "$COMPOSE_VERSION" ]] || die "installed plugin reports '$(compose_built_version)', expected $COMPOSE_VERSION"
  info "built in $((SECONDS - t0)) s"
}

do_compose() {
  step "Docker: compose plugin ($COMPOSE_PLUGIN: Debian $COMPOSE_DEB_SUITE's $COMPOSE_DEB_VERSION, or $COMPOSE_VERSION from source)"
  local have want
  have=$(compose_version)
  case "$INFRA_COMPOSE_FROM" in
    debian) want="$COMPOSE_DEB_VERSION ${COMPOSE_VERSION#v}" ;;
    source) want="${COMPOSE_VERSION#v}" ;;
    *) die "INFRA_COMPOSE_FROM=$INFRA_COMPOSE_FROM: want debian or source" ;;
  esac
  if [[ -n "$have" && " $want " == *" $have "* ]]; then
    info "already installed"
  else
    [[ -n "$have" ]] && info "found $have, want one of: $want: replacing it"
    if [[ "$INFRA_COMPOSE_FROM" == source ]] || ! compose_from_debian; then
      command -v go >/dev/null || die "go not found in PATH (needed to build compose)"
      compose_from_source
    fi
  fi
  local v
  v=$(docker compose version --short 2>&1) || die "docker compose version failed: $v"
  [[ " $want " == *" $(compose_version) "* ]] || die "docker compose version says '$v', expected one of: $want (another plugin earlier in the CLI's search path?)"
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
  -h|--help|help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: $0 [up|status|stop]" >&2; exit 2 ;;
esac
