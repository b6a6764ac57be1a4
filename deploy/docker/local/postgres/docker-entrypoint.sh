#!/bin/bash
# Entry point of the pgvector stand-in: the official postgres image's behaviour that
# deploy/compose relies on (see the Dockerfile).
set -Eeuo pipefail

# `docker run IMAGE -c x=y` means the server with those options.
if [[ "${1:-}" == -* ]]; then set -- postgres "$@"; fi
# Anything else (psql for the migrate job, a shell) runs as given.
if [[ "${1:-}" != postgres ]]; then exec "$@"; fi

PGDATA=${PGDATA:-/var/lib/postgresql/data}
if [[ $(id -u) == 0 ]]; then
  # A fresh volume or bind mount may belong to root; the server refuses group/world access.
  mkdir -p "$PGDATA" /var/run/postgresql
  find "$PGDATA" /var/run/postgresql \! -user postgres -exec chown postgres:postgres '{}' +
  chmod 0700 "$PGDATA"
  export HOME=/var/lib/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

log() { echo "pgvector stand-in: $*" >&2; }

if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  export POSTGRES_USER=${POSTGRES_USER:-postgres}
  export POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  if [[ -z "${POSTGRES_PASSWORD:-}" && "$auth" != trust ]]; then
    log "the database is uninitialized and POSTGRES_PASSWORD is not set (or set POSTGRES_HOST_AUTH_METHOD=trust)"
    exit 1
  fi
  log "initdb in $PGDATA (superuser $POSTGRES_USER, database $POSTGRES_DB, other hosts: $auth)"
  pwopt=()
  if [[ -n "${POSTGRES_PASSWORD:-}" ]]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    pwopt=(--pwfile="$pwfile")
  fi
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of options, as in the official image
  initdb --username="$POSTGRES_USER" "${pwopt[@]}" -D "$PGDATA" ${POSTGRES_INITDB_ARGS:-} >&2
  rm -f "${pwfile:-}"
  printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
  printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

  # The init server listens on a private socket only: pg_isready (the health check) and
  # clients on the network see nothing until the real server starts below.
  sock=$(mktemp -d)
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=$sock" start >&2
  export PGHOST=$sock PGUSER=$POSTGRES_USER PGPASSWORD=${POSTGRES_PASSWORD:-}
  psql=(psql -X -v ON_ERROR_STOP=1 --no-password)
  if [[ "$POSTGRES_DB" != postgres ]]; then
    "${psql[@]}" --dbname postgres -v db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";' >&2
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    [[ -e "$f" ]] || continue
    case "$f" in
      *.sh)
        log "running $f"
        # shellcheck source=/dev/null # init scripts come from the image's user
        if [[ -x "$f" ]]; then "$f"; else . "$f"; fi ;;
      *.sql) log "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" >&2 ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" >&2 ;;
      *) log "ignoring $f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >&2
  unset PGHOST PGUSER PGPASSWORD
  rmdir "$sock" || true
  log "init done"
fi

exec "$@"
