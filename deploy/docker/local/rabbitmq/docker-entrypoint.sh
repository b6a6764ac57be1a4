#!/bin/bash
# Entry point of the rabbitmq stand-in: the part of the official image's entry point that
# compose and a later cluster rely on, the shared Erlang cookie.
set -euo pipefail

cookie=""
if [[ -n "${RABBITMQ_ERLANG_COOKIE_FILE:-}" ]]; then
  cookie=$(<"$RABBITMQ_ERLANG_COOKIE_FILE")
elif [[ -n "${RABBITMQ_ERLANG_COOKIE:-}" ]]; then
  cookie=$RABBITMQ_ERLANG_COOKIE
fi
if [[ -n "$cookie" ]]; then
  # Cluster peers and every CLI call (the health check included) authenticate with the
  # cookie in $HOME, so the variable wins over a cookie left in the data volume.
  file="$HOME/.erlang.cookie"
  if [[ ! -f "$file" || "$(<"$file")" != "$cookie" ]]; then
    [[ -f "$file" ]] && chmod 600 "$file"
    printf '%s' "$cookie" >"$file"
  fi
  chmod 400 "$file"
fi

if [[ "${1:-}" == rabbitmq-server ]]; then
  echo "rabbitmq stand-in: node ${RABBITMQ_NODENAME:-rabbit@$(hostname -s)}, $(ls /etc/rabbitmq/conf.d | tr '\n' ' ')" >&2
fi
exec "$@"
