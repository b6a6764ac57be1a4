#!/usr/bin/env bash
# deploy/local/up.sh - run the whole platform on this machine (what `make up` does).
#
#   bash deploy/local/up.sh        # provision, build, start every service, wait until ready
#   bash deploy/local/up.sh down   # stop what up started (SIGTERM, then wait)
#   bash deploy/local/up.sh status # which services run, where
#
# Assumes `make infra` ran (make up does it first). Each service runs as a
# background process with its OWN broker user and database role (from
# deploy/local/provision.sh), logs in .data/logs/<service>.log and a pidfile in
# .data/run/. A local SMTP sink (127.0.0.1:1025, mails in .data/mail/) stands
# in for the mail relay. Running it twice starts only what is not running.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
cd "$REPO_ROOT"
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi

BIN="$REPO_ROOT/bin"
RUN="$REPO_ROOT/.data/run"
LOGS="$REPO_ROOT/.data/logs"
JWT_DIR="$REPO_ROOT/.data/jwt"
MAIL_DIR="$REPO_ROOT/.data/mail"
SMTP_ADDR="${SMTP_ADDR:-127.0.0.1:1025}"
SERVICES=(request workflow communication document-worker ai-builder datalake-ingestion analytics)
declare -A PORT=([request]=8081 [workflow]=8082 [communication]=8083 [document-worker]=8084
  [ai-builder]=8085 [datalake-ingestion]=8086 [analytics]=8087)

step() { echo "==> $*"; }
die() { echo "!!! up.sh: $*" >&2; exit 1; }

alive() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start_bg() { # name, command...
  local name=$1; shift
  nohup setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}

wait_ready() { # name url
  local name=$1 url=$2
  for _ in $(seq 1 120); do
    if curl -fsS -o /dev/null -m 2 "$url"; then return 0; fi
    alive "$name" || { tail -n 30 "$LOGS/$name.log" >&2; die "$name exited during start-up (log above, full log $LOGS/$name.log)"; }
    sleep 0.5
  done
  tail -n 30 "$LOGS/$name.log" >&2
  die "$name not ready at $url after 60 s (log $LOGS/$name.log)"
}

cmd_up() {
  mkdir -p "$BIN" "$RUN" "$LOGS" "$MAIL_DIR"
  step "provision: per-service broker users (vhost agora) and database roles (database agora)"
  bash "$SCRIPT_DIR/provision.sh" all

  step "build: fabricctl, smtpsink and ${#SERVICES[@]} services into bin/"
  go build -o "$BIN/fabricctl" ./pkg/fabric/cmd/fabricctl
  go build -o "$BIN/smtpsink" ./services/communication/cmd/smtpsink
  for s in "${SERVICES[@]}"; do
    [[ -d "services/$s/cmd/$s" ]] || die "services/$s/cmd/$s is missing"
    go build -o "$BIN/$s" "./services/$s/cmd/$s"
  done

  step "local-development JWT keys in .data/jwt (make token mints tokens)"
  "$BIN/fabricctl" token --keys-dir "$JWT_DIR" >/dev/null

  step "SMTP sink on $SMTP_ADDR (mails in .data/mail)"
  if alive smtpsink; then echo "    already running"; else
    start_bg smtpsink "$BIN/smtpsink" -addr "$SMTP_ADDR" -dir "$MAIL_DIR"
  fi

  for s in "${SERVICES[@]}"; do
    if alive "$s"; then echo "==> $s already running (pid $(cat "$RUN/$s.pid"))"; continue; fi
    step "start $s on 127.0.0.1:${PORT[$s]}"
    local envs=()
    while IFS= read -r line; do envs+=("$line"); done < <(bash "$SCRIPT_DIR/provision.sh" env "$s")
    while IFS= read -r line; do envs+=("$line"); done < <(fairness_env)
    envs+=("HTTP_ADDR=127.0.0.1:${PORT[$s]}" "JWT_KEYS=$JWT_DIR/jwks.json" "SMTP_ADDR=$SMTP_ADDR"
      "S3_ENDPOINT=${S3_ENDPOINT:-127.0.0.1:9000}" "S3_ACCESS_KEY=${S3_ACCESS_KEY:-agora-dev}" "S3_SECRET_KEY=${S3_SECRET_KEY:-agora-dev-secret}"
      "HISTORY_URL=http://127.0.0.1:${PORT[datalake-ingestion]}")
    if [[ "$s" == request ]]; then
      # The operator console at http://127.0.0.1:8081/console/ asks every other service.
      local others=() o
      for o in "${SERVICES[@]}"; do [[ "$o" == request ]] || others+=("$o=http://127.0.0.1:${PORT[$o]}"); done
      envs+=("CONSOLE_SERVICES=$(IFS=,; echo "${others[*]}")")
      envs+=("GATEWAY_SOURCES_FILE=$(gateway_sources)")
    fi
    if [[ "$s" == datalake-ingestion ]]; then envs+=("DATALAKE_SEAL_KEY=$(datalake_seal_key)"); fi
    start_bg "$s" env "${envs[@]}" "$BIN/$s"
  done
  for s in "${SERVICES[@]}"; do wait_ready "$s" "http://127.0.0.1:${PORT[$s]}/readyz"; done
  cmd_status
  echo
  echo "Try: make demo   (logs: .data/logs/<service>.log, stop: make down)"
  echo "Operator console: http://127.0.0.1:${PORT[request]}/console/ (log in with: make token TENANT=org-a SUB=ana ROLES=operator)"
}

# fairness_env prints the publish limits of deploy/local/fairness.env, which
# compose reads too (docs/deploy.md, "Fairness defaults"), each as KEY=VALUE; a
# variable set in the caller's environment wins over the file's value.
fairness_env() {
  local line key
  while IFS= read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    key=${line%%=*}
    if [[ -n "${!key:-}" ]]; then echo "$key=${!key}"; else echo "$line"; fi
  done <"$SCRIPT_DIR/fairness.env"
}

# gateway_sources writes (once) the external systems the request service's
# gateway accepts locally: a catalog system of tenant org-demo, whose random
# secret `make demo-reactive` reads from the same file to sign its event.
gateway_sources() {
  local f="$REPO_ROOT/.data/gateway/sources.json"
  if [[ ! -s "$f" ]]; then
    mkdir -p "$(dirname "$f")"
    (umask 077; printf '[{"id":"catalog","uri":"https://catalogo.example.org","tenantId":"org-demo","secret":"%s","types":["catalog.service-updated.v1"]}]\n' \
      "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$f")
  fi
  echo "$f"
}

# datalake_seal_key prints the data lake's master key (DATALAKE_SEAL_KEY, the
# standard base64 of 32 random bytes), made once in .data/datalake/seal.key and
# kept: the lake's sealed fields do not open under another key. A key set in the
# caller's environment wins.
datalake_seal_key() {
  if [[ -n "${DATALAKE_SEAL_KEY:-}" ]]; then echo "$DATALAKE_SEAL_KEY"; return; fi
  local f="$REPO_ROOT/.data/datalake/seal.key"
  if [[ ! -s "$f" ]]; then
    mkdir -p "$(dirname "$f")"
    (umask 077; head -c 32 /dev/urandom | base64 > "$f")
  fi
  cat "$f"
}

cmd_down() {
  local names=("${SERVICES[@]}" smtpsink)
  for s in "${names[@]}"; do
    [[ -f "$RUN/$s.pid" ]] || continue
    local pid; pid=$(cat "$RUN/$s.pid")
    if kill -0 "$pid" 2>/dev/null; then
      echo "==> stop $s (pid $pid)"
      kill -TERM "$pid"
    fi
  done
  for s in "${names[@]}"; do
    [[ -f "$RUN/$s.pid" ]] || continue
    local pid; pid=$(cat "$RUN/$s.pid")
    # Graceful: in-flight messages finish and are acked, or go back to the queue.
    for _ in $(seq 1 70); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "!!! $s did not stop within 35 s; killing it (unacked messages return to their queue)" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$s.pid"
  done
  echo "stopped"
}

cmd_status() {
  printf '%-20s %-8s %s\n' SERVICE PID URL
  for s in "${SERVICES[@]}"; do
    local pid=- state=stopped
    if alive "$s"; then pid=$(cat "$RUN/$s.pid"); state="http://127.0.0.1:${PORT[$s]}"; fi
    printf '%-20s %-8s %s\n' "$s" "$pid" "$state"
  done
  echo "RabbitMQ UI: http://127.0.0.1:15672 (vhost agora)   MinIO console: http://127.0.0.1:9001"
}

case "${1:-up}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 [up|down|status]" >&2; exit 2 ;;
esac
