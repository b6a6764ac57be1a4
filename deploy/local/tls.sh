#!/usr/bin/env bash
# deploy/local/tls.sh - TLS for the local RabbitMQ (idempotent).
#
#   bash deploy/local/tls.sh          # certificates + TLS listener on 127.0.0.1:5671
#   bash deploy/local/tls.sh status   # say what is configured, change nothing
#
# 1. `go run ./deploy/cmd/devcerts` keeps or creates the development CA and the
#    server/client certificates in .data/certs/ (gitignored).
# 2. The CA, server certificate and key are installed in /etc/rabbitmq/tls/
#    (owned by the rabbitmq user, which cannot read the repository's 0600 keys).
# 3. A managed block in /etc/rabbitmq/rabbitmq.conf (other settings are kept)
#    adds the listener with verify_peer and fail_if_no_peer_cert = false:
#    clients without a certificate connect with server-authenticated TLS (and
#    log in with their password); a client that presents a certificate must
#    present one signed by the development CA, or the handshake fails.
# 4. RabbitMQ reads its configuration only at boot: the broker is restarted
#    (rabbitmqctl stop; rabbitmq-server -detached; await_startup) only when the
#    block or the installed files changed, or when 5671 is not listening. A
#    restart drops every client connection on the machine. If the broker does
#    not come back with the new configuration, the old one is restored.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
CERT_DIR="$REPO_ROOT/.data/certs"
CONF="${RABBITMQ_CONF:-/etc/rabbitmq/rabbitmq.conf}"
TLS_DIR="${RABBITMQ_TLS_DIR:-/etc/rabbitmq/tls}"
AMQP_PORT="${INFRA_RABBIT_PORT:-5672}"
TLS_PORT="${INFRA_RABBIT_TLS_PORT:-5671}"
BEGIN="# BEGIN agora tls (managed by deploy/local/tls.sh; edits inside are overwritten)"
END="# END agora tls"

if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi

info() { echo "    $*"; }
die() { echo "!!! tls.sh: $*" >&2; exit 1; }
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
wait_port() {
  local i
  for ((i = 0; i < $2; i++)); do port_open "$1" && return 0; sleep 1; done
  return 1
}

block() {
  cat <<EOF
$BEGIN
listeners.ssl.local = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $TLS_DIR/ca.pem
ssl_options.certfile = $TLS_DIR/server.pem
ssl_options.keyfile = $TLS_DIR/server-key.pem
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
$END
EOF
}

# desired_conf prints $CONF with the managed block replaced (or appended).
# The block stays where it is: another managed block (infra.sh's statistics)
# may follow it, and moving it to the end changed the file, which cost a
# second make infra a needless broker restart.
desired_conf() {
  local b
  b=$(block)
  if [[ -f "$CONF" ]] && grep -qxF "$BEGIN" "$CONF"; then
    BLOCK="$b" awk -v b="$BEGIN" -v e="$END" '$0 == b {skip = 1; print ENVIRON["BLOCK"]} !skip {print} $0 == e {skip = 0}' "$CONF"
    return
  fi
  [[ -f "$CONF" ]] && cat "$CONF"
  printf '%s\n' "$b"
}

# install_file SRC DST MODE: copy when different; prints "changed" when it did.
install_file() {
  if [[ -f "$2" ]] && cmp -s "$1" "$2"; then return 0; fi
  install -o rabbitmq -g rabbitmq -m "$3" "$1" "$2"
  echo changed
}

restart_broker() {
  info "restarting RabbitMQ to load the TLS listener (client connections drop once)"
  rabbitmqctl stop >/dev/null 2>&1 || true
  local i
  for ((i = 0; i < 60; i++)); do port_open "$AMQP_PORT" || break; sleep 1; done
  rabbitmq-server -detached >/dev/null 2>&1 || return 1
  wait_port "$AMQP_PORT" 90 || return 1
  timeout 120 rabbitmqctl await_startup >/dev/null || return 1
  wait_port "$TLS_PORT" 30 || return 1
}

cmd_status() {
  if grep -qxF "$BEGIN" "$CONF" 2>/dev/null; then info "managed block present in $CONF"; else info "no managed block in $CONF"; fi
  if port_open "$TLS_PORT"; then info "TLS listener on 127.0.0.1:$TLS_PORT"; else info "nothing on 127.0.0.1:$TLS_PORT"; fi
  [[ -f "$CERT_DIR/ca.pem" ]] && info "CA: $CERT_DIR/ca.pem" || info "no CA in $CERT_DIR"
}

cmd_up() {
  [[ $EUID -eq 0 ]] || die "run as root (writes $CONF and $TLS_DIR, restarts RabbitMQ)"
  command -v rabbitmqctl >/dev/null || die "rabbitmqctl not found: run deploy/local/infra.sh first"
  echo "==> TLS: development certificates in $CERT_DIR"
  (cd "$REPO_ROOT" && go run ./deploy/cmd/devcerts -out "$CERT_DIR") | sed 's/^/    /' \
    || die "go run ./deploy/cmd/devcerts failed"

  echo "==> TLS: RabbitMQ listener on 127.0.0.1:$TLS_PORT"
  local changed="" backup
  install -d -o rabbitmq -g rabbitmq -m 0750 "$TLS_DIR"
  changed+=$(install_file "$CERT_DIR/ca.pem" "$TLS_DIR/ca.pem" 0644)
  changed+=$(install_file "$CERT_DIR/server.pem" "$TLS_DIR/server.pem" 0644)
  changed+=$(install_file "$CERT_DIR/server-key.pem" "$TLS_DIR/server-key.pem" 0600)
  [[ -n "$changed" ]] && info "installed certificates in $TLS_DIR"

  backup=$(mktemp)
  [[ -f "$CONF" ]] && cp -p "$CONF" "$backup"
  if ! desired_conf | cmp -s - "$CONF"; then
    desired_conf >"$CONF.agora-new"
    chmod 0644 "$CONF.agora-new"
    mv "$CONF.agora-new" "$CONF"
    info "updated the managed block in $CONF"
    changed+=conf
  fi

  if [[ -z "$changed" ]] && port_open "$TLS_PORT"; then
    info "already listening, configuration unchanged"
    rm -f "$backup"
    return 0
  fi
  if ! restart_broker; then
    echo "!!! tls.sh: RabbitMQ did not come back with TLS; restoring the previous $CONF (see /var/log/rabbitmq/)" >&2
    cp -p "$backup" "$CONF"
    rm -f "$backup"
    port_open "$AMQP_PORT" || { rabbitmq-server -detached >/dev/null 2>&1; wait_port "$AMQP_PORT" 90; timeout 120 rabbitmqctl await_startup >/dev/null; } || true
    die "TLS listener not configured"
  fi
  rm -f "$backup"
  info "listening: amqps://127.0.0.1:$TLS_PORT/ (CA $CERT_DIR/ca.pem)"
}

case "${1:-up}" in
  up) cmd_up ;;
  status) cmd_status ;;
  -h|--help|help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: $0 [up|status]" >&2; exit 2 ;;
esac
