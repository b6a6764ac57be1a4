#!/usr/bin/env bash
# deploy/docker/local/build.sh - local stand-ins for the public images that deploy/compose
# and deploy/docker/service.Dockerfile use, for a machine that reaches no container
# registry (idempotent; `make images`).
#
#   bash deploy/docker/local/build.sh [build]  # build what is missing or out of date
#   bash deploy/docker/local/build.sh rabbitmq # only the base and the RabbitMQ stand-in (make cluster-test)
#   bash deploy/docker/local/build.sh check    # fail unless every stand-in exists
#   bash deploy/docker/local/build.sh list     # names and sizes
#   AGORA_BINARIES=prebuilt bash ...           # all but the Go builder (not used then)
#
# Everything starts from Debian bookworm (debootstrap --variant=minbase) imported as
# agora-local/debian:bookworm. The other names are in local.env, which compose reads too.
# Inputs taken from this machine: its Go (/usr/local/go), and the pgvector files and MinIO
# binary that `make infra` builds; mc is built here with go install, pinned. RabbitMQ,
# PostgreSQL and Prometheus are Debian's packages, installed with apt in the base.
# Each image is labelled with a hash of its inputs (recipe, files, versions, base image):
# a build is skipped while the label matches. FORCE=1 rebuilds everything (the base
# included, e.g. for Debian's security updates).
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../../.." && pwd)
WORK_DIR="$REPO_ROOT/.data/local-images"   # gitignored: build contexts, debootstrap tree, binaries
LOG_DIR="$REPO_ROOT/.data/logs"
LOG="$LOG_DIR/images.log"
FORCE="${FORCE:-0}"
# go install parallelism (-p) for mc (and MinIO when make infra has not built it): every core.
INFRA_GO_BUILD_P="${INFRA_GO_BUILD_P:-$(nproc)}"
LABEL="agora.local.inputs"

SUITE=bookworm
BASE_IMAGE="agora-local/debian:$SUITE"
PG_MAJOR=15
# Trust anchors the machine adds to Debian's (update-ca-certificates); the Go builder gets them.
LOCAL_CA=/usr/local/share/ca-certificates
# mc at the commit of its RELEASE.2025-03-12T17-29-24Z tag (MC_IMAGE's tag): the newest
# release the Go module proxy serves here (later ones are unknown to its checksum database);
# its go.mod has no replace or exclude directive, which go install would refuse.
MC_MODULE="github.com/minio/mc"
MC_VERSION="v0.0.0-20250312172924-c1d5d4cbb4ca"
MINIO_MODULE="github.com/minio/minio"

# shellcheck source=local.env
. "$SCRIPT_DIR/local.env"
IMAGES=("$BASE_IMAGE" "$DEBIAN_IMAGE" "$GO_IMAGE" "$RUNTIME_IMAGE" "$RABBITMQ_IMAGE" "$POSTGRES_IMAGE" "$MINIO_IMAGE" "$MC_IMAGE" "$PROMETHEUS_IMAGE")
# The Go builder is only for service images that compile inside it (service.Dockerfile,
# BINARIES=build). `make compose-up` and `make compose-test` compile on the host and set
# AGORA_BINARIES=prebuilt: then it is neither built nor required (minutes saved on a cold run).
NEED_GO_IMAGE=1
if [[ "${AGORA_BINARIES:-build}" == prebuilt ]]; then
  NEED_GO_IMAGE=0
  IMAGES=("${IMAGES[@]/"$GO_IMAGE"}")
  mapfile -t IMAGES < <(printf '%s\n' "${IMAGES[@]}" | grep .)
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi

# shellcheck source=../../local/steps.sh
. "$REPO_ROOT/deploy/local/steps.sh"

image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
image_inputs() { docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null || true; }
# fresh TAG HASH: TAG exists and was built from these inputs
fresh() { [[ "$FORCE" != 1 && "$(image_inputs "$1")" == "$2" ]]; }
hash_of() { sha256sum | cut -c1-24; }
# dir_inputs DIR: names, modes and contents of a recipe directory, for hashing
dir_inputs() {
  local f
  while IFS= read -r f; do
    echo "== ${f#"$SCRIPT_DIR"/} $(stat -c %a "$f")"
    cat "$f"
  done < <(find "$1" -type f | LC_ALL=C sort)
}
# bin_version BIN MODULE: the module version go install compiled into BIN
bin_version() { go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m {print $3}' || true; }

# docker_build TAG HASH CONTEXT [docker build args...]
docker_build() {
  local tag=$1 hash=$2 ctx=$3 t0=$SECONDS; shift 3
  info "docker build -t $tag (log $LOG)"
  # The classic builder: these recipes need nothing from BuildKit, and the docker CLI
  # has no buildx plugin here.
  run_logged images env DOCKER_BUILDKIT=0 docker build --label "$LABEL=$hash" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$tag" "$@" "$ctx" || die "docker build of $tag failed"
  info "built $tag in $((SECONDS - t0)) s"
}

# new_context NAME: an empty build context under $WORK_DIR
new_context() {
  local ctx="$WORK_DIR/ctx/$1"
  rm -rf "$ctx" && mkdir -p "$ctx"
  echo "$ctx"
}

debian_uri() { # security|main
  local want=$1 u
  if [[ "$want" == security ]]; then
    u=$(awk '/^URIs:/ && $2 ~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [[ -n "$u" ]] || u=$(awk '$1 == "deb" && /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null || true)
  else
    u=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [[ -n "$u" ]] || u=$(awk '$1 == "deb" && !/security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  echo "$u"
}

# remove_tree DIR: a debootstrap tree, after unmounting whatever an interrupted run left
# mounted inside it; --one-file-system never follows a mount that is still there.
remove_tree() {
  local d=$1 m
  [[ -d "$d" ]] || return 0
  while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done \
    < <(awk -v d="$d" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r)
  rm -rf --one-file-system "$d"
}

# ------------------------------------------------------------------- steps ---
check_engine() {
  step "engine: docker info"
  timeout 10 docker info >/dev/null 2>&1 \
    || die "no container engine answers: run 'make infra' (deploy/local/docker.sh) first"
  info "engine $(docker version -f '{{.Server.Version}} (API {{.Server.APIVersion}})')"
}

build_base() {
  step "base: $BASE_IMAGE and $DEBIAN_IMAGE (debootstrap --variant=minbase $SUITE)"
  local mirror security hash tree t0
  mirror=$(debian_uri main)
  security=$(debian_uri security)
  [[ -n "$mirror" ]] || die "cannot read the Debian mirror URI from /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
  hash=$({ declare -f build_base; echo "$SUITE $mirror $security"; } | hash_of)
  if fresh "$BASE_IMAGE" "$hash"; then
    info "up to date"
  else
    if ! command -v debootstrap >/dev/null; then
      info "apt-get install debootstrap"
      run_logged images apt-get -q -o DPkg::Lock::Timeout=300 update || die "apt-get update failed"
      run_logged images apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends debootstrap \
        || die "apt-get install debootstrap failed"
    fi
    tree="$WORK_DIR/rootfs-$SUITE"
    remove_tree "$tree"
    mkdir -p "$tree"
    info "debootstrap from $mirror (about a minute)"
    t0=$SECONDS
    run_logged images debootstrap --variant=minbase "$SUITE" "$tree" "$mirror" || { remove_tree "$tree"; die "debootstrap failed"; }
    info "debootstrap done in $((SECONDS - t0)) s"

    # The machine's own mirrors, updates and security included, so images get the
    # package versions the host has.
    rm -f "$tree/etc/apt/sources.list"
    {
      printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$SUITE" "$SUITE"
      if [[ -n "$security" ]]; then
        printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
          "$security" "$SUITE"
      fi
    } >"$tree/etc/apt/sources.list.d/debian.sources"
    # As in Docker's own Debian images: no package starts a service during a build, apt
    # keeps no .deb files or caches in layers, and fetches no translations.
    printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
    chmod 0755 "$tree/usr/sbin/policy-rc.d"
    cat >"$tree/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$tree/etc/apt/apt.conf.d/docker-no-languages"
    rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/*.bin "$tree"/var/cache/apt/archives/*.deb
    find "$tree/var/log" -type f -delete
    # The engine provides these per container; debootstrap copied the host's.
    : >"$tree/etc/resolv.conf"
    echo localhost >"$tree/etc/hostname"

    info "docker import (tar of $(du -sh "$tree" | cut -f1))"
    t0=$SECONDS
    tar --numeric-owner -C "$tree" -c . | docker import - "$BASE_IMAGE-rootfs" >>"$LOG" \
      || die "docker import failed"
    # An imported image has no environment: PATH as in Docker's Debian images, and the label
    # that makes the next run skip all this.
    printf 'FROM %s\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCMD ["bash"]\n' \
      "$BASE_IMAGE-rootfs" >"$WORK_DIR/base.Dockerfile"
    mkdir -p "$WORK_DIR/ctx/empty"
    run_logged images env DOCKER_BUILDKIT=0 docker build --label "$LABEL=$hash" -t "$BASE_IMAGE" \
      -f "$WORK_DIR/base.Dockerfile" "$WORK_DIR/ctx/empty" || die "labelling $BASE_IMAGE failed"
    docker rmi "$BASE_IMAGE-rootfs" >/dev/null
    remove_tree "$tree"
    info "imported in $((SECONDS - t0)) s"
  fi
  # debian:bookworm-slim stand-in: the minbase image is what -slim is, a minimal bookworm.
  if [[ "$(image_id "$DEBIAN_IMAGE")" != "$(image_id "$BASE_IMAGE")" ]]; then
    docker tag "$BASE_IMAGE" "$DEBIAN_IMAGE"
    info "tagged $DEBIAN_IMAGE"
  fi
}

build_golang() {
  step "Go builder: $GO_IMAGE (stand-in for golang:1.26-bookworm, this machine's Go)"
  local goroot gover want hash ctx env_lines
  goroot=$(go env GOROOT)
  gover=$(go env GOVERSION)
  want=${GO_IMAGE##*:}
  want=${want%%-*}
  [[ "$gover" == "go$want" || "$gover" == "go$want."* ]] \
    || die "this machine has $gover, but $GO_IMAGE (local.env) promises Go $want"
  mapfile -t env_lines < <(go env GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOFLAGS)
  hash=$({ declare -f build_golang; dir_inputs "$SCRIPT_DIR/golang"; image_id "$BASE_IMAGE"; cat "$goroot/VERSION"
           printf '%s\n' "${env_lines[@]}"; find "$LOCAL_CA" -name '*.crt' -type f -exec sha256sum {} + 2>/dev/null | sort; } | hash_of)
  if fresh "$GO_IMAGE" "$hash"; then info "up to date ($gover)"; return; fi
  ctx=$(new_context golang)
  cp "$SCRIPT_DIR/golang/Dockerfile" "$ctx/"
  mkdir -p "$ctx/local-ca"
  if [[ -d "$LOCAL_CA" ]]; then cp -r "$LOCAL_CA/." "$ctx/local-ca/"; fi
  info "local CA certificates: $(find "$ctx/local-ca" -name '*.crt' -type f | wc -l) from $LOCAL_CA"
  # Hard links when /usr/local/go is on the same file system: nothing is copied.
  cp -al "$goroot" "$ctx/go" 2>/dev/null || { rm -rf "$ctx/go"; cp -a "$goroot" "$ctx/go"; }
  info "context: $goroot ($gover, $(du -sh "$goroot" | cut -f1))"
  docker_build "$GO_IMAGE" "$hash" "$ctx" \
    --build-arg "GOPROXY=${env_lines[0]}" --build-arg "GOSUMDB=${env_lines[1]}" \
    --build-arg "GONOSUMDB=${env_lines[2]}" --build-arg "GOPRIVATE=${env_lines[3]}" \
    --build-arg "GOFLAGS=${env_lines[4]}"
  rm -rf "$ctx"
  info "in the image: $(docker run --rm "$GO_IMAGE" go version)"
  # Service builds download modules in this image: the proxy must answer, over TLS.
  local answer
  answer=$(docker run --rm "$GO_IMAGE" go list -m golang.org/x/sync@latest 2>&1) \
    || die "the module proxy does not answer from $GO_IMAGE (GOPROXY=${env_lines[0]}): $answer"
  info "module proxy from the image: ok ($answer)"
}

build_runtime() {
  step "runtime: $RUNTIME_IMAGE (stand-in for gcr.io/distroless/static-debian12:nonroot)"
  local hash
  hash=$({ declare -f build_runtime; dir_inputs "$SCRIPT_DIR/runtime"; image_id "$BASE_IMAGE"; } | hash_of)
  if fresh "$RUNTIME_IMAGE" "$hash"; then info "up to date"; return; fi
  docker_build "$RUNTIME_IMAGE" "$hash" "$SCRIPT_DIR/runtime"
  local user
  user=$(docker image inspect -f '{{.Config.User}}' "$RUNTIME_IMAGE")
  [[ "$user" == 65532:65532 ]] || die "$RUNTIME_IMAGE runs as '$user', want 65532:65532"
  info "user $user, $(docker image inspect -f '{{.Size}}' "$RUNTIME_IMAGE" | awk '{printf "%.1f MB", $1 / 1e6}')"
}

build_rabbitmq() {
  step "RabbitMQ: $RABBITMQ_IMAGE (stand-in for rabbitmq:3.13-management, Debian's rabbitmq-server)"
  local hash cid i v t0
  hash=$({ declare -f build_rabbitmq; dir_inputs "$SCRIPT_DIR/rabbitmq"; image_id "$BASE_IMAGE"; } | hash_of)
  if fresh "$RABBITMQ_IMAGE" "$hash"; then info "up to date"; return; fi
  docker_build "$RABBITMQ_IMAGE" "$hash" "$SCRIPT_DIR/rabbitmq"
  v=$(docker run --rm --entrypoint dpkg-query "$RABBITMQ_IMAGE" -W -f '${Version}' rabbitmq-server)
  info "rabbitmq-server $v"
  info "verify: boot a node (rabbit@check), wait for its management listener (rabbitmq-diagnostics check_port_listener 15672)"
  cid=$(docker run -d --hostname check -e RABBITMQ_ERLANG_COOKIE=agora-image-check "$RABBITMQ_IMAGE")
  t0=$SECONDS
  for ((i = 0; i < 90; i++)); do
    docker exec "$cid" rabbitmq-diagnostics -q check_port_listener 15672 >/dev/null 2>&1 && break
    [[ "$(docker inspect -f '{{.State.Running}}' "$cid")" == true ]] || break
    sleep 1
  done
  if ((i >= 90)) || [[ "$(docker inspect -f '{{.State.Running}}' "$cid")" != true ]]; then
    docker logs --tail 30 "$cid" >&2 || true
    docker rm -f "$cid" >/dev/null
    die "the node did not come up with its management listener within 90 s (logs above)"
  fi
  info "node $(docker exec "$cid" rabbitmqctl -q eval 'node().' 2>/dev/null || echo '?') up in $((SECONDS - t0)) s, management on 15672"
  docker rm -f "$cid" >/dev/null
}

build_postgres() {
  step "PostgreSQL: $POSTGRES_IMAGE (stand-in for pgvector/pgvector:pg$PG_MAJOR)"
  local lib="/usr/lib/postgresql/$PG_MAJOR/lib" ext="/usr/share/postgresql/$PG_MAJOR/extension" hash ctx cid i v
  [[ -f "$lib/vector.so" && -f "$ext/vector.control" ]] \
    || die "pgvector is not installed for PostgreSQL $PG_MAJOR on this machine: run 'make infra' (it builds pgvector) first"
  hash=$({ declare -f build_postgres; dir_inputs "$SCRIPT_DIR/postgres"; image_id "$BASE_IMAGE"; sha256sum "$lib/vector.so" "$ext"/vector.control "$ext"/vector--*.sql; } | hash_of)
  if fresh "$POSTGRES_IMAGE" "$hash"; then info "up to date"; return; fi
  ctx=$(new_context postgres)
  cp -a "$SCRIPT_DIR/postgres/." "$ctx/"
  mkdir -p "$ctx/pgvector/lib" "$ctx/pgvector/extension"
  cp "$lib/vector.so" "$ctx/pgvector/lib/"
  cp "$ext"/vector.control "$ext"/vector--*.sql "$ctx/pgvector/extension/"
  info "pgvector $(awk -F"'" '/default_version/ {print $2}' "$ext/vector.control") from $lib and $ext"
  docker_build "$POSTGRES_IMAGE" "$hash" "$ctx"
  rm -rf "$ctx"

  info "verify: initdb, an init script, CREATE EXTENSION vector with an HNSW index"
  mkdir -p "$WORK_DIR/pg-check"
  echo 'CREATE TABLE init_ran (ok boolean);' >"$WORK_DIR/pg-check/01-check.sql"
  cid=$(docker run -d -e POSTGRES_DB=check -e POSTGRES_PASSWORD=check \
    -v "$WORK_DIR/pg-check:/docker-entrypoint-initdb.d:ro" "$POSTGRES_IMAGE")
  for ((i = 0; i < 60; i++)); do
    docker exec "$cid" pg_isready -q -U postgres -d check 2>/dev/null && break
    [[ "$(docker inspect -f '{{.State.Running}}' "$cid")" == true ]] || break
    sleep 1
  done
  if ! docker exec -i "$cid" psql -X -q -v ON_ERROR_STOP=1 -U postgres -d check >>"$LOG" 2>&1 <<'SQL'
SELECT 1 FROM init_ran LIMIT 0;
CREATE EXTENSION vector;
CREATE TABLE items (id int PRIMARY KEY, embedding vector(3));
INSERT INTO items VALUES (1, '[1,0,0]'), (2, '[0,1,0]');
CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops);
SELECT id FROM items ORDER BY embedding <=> '[1,0.1,0]' LIMIT 1;
SQL
  then
    docker logs --tail 30 "$cid" >&2 || true
    docker rm -f "$cid" >/dev/null
    die "the vector extension check failed in $POSTGRES_IMAGE (container logs above, psql output in $LOG)"
  fi
  v=$(docker exec "$cid" psql -X -tA -U postgres -d check -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', vector ' || extversion FROM pg_extension WHERE extname = 'vector'")
  docker rm -f "$cid" >/dev/null
  [[ -n "$v" ]] || die "no vector extension in the check database after CREATE EXTENSION"
  info "ok: $v"
  rm -rf "$WORK_DIR/pg-check"
}

build_minio() {
  step "MinIO: $MINIO_IMAGE and $MC_IMAGE (stand-ins for quay.io/minio/minio and quay.io/minio/mc)"
  local pin host_bin minio mc bin_dir="$WORK_DIR/bin" hash ctx t0
  pin=$(sed -n 's/^MINIO_VERSION="\${INFRA_MINIO_VERSION:-\(v[^}]*\)}"$/\1/p' "$REPO_ROOT/deploy/local/infra.sh")
  [[ -n "$pin" ]] || die "cannot read the MinIO pin (MINIO_VERSION) from deploy/local/infra.sh"
  [[ "${MINIO_IMAGE##*:}" == "$pin" ]] || die "local.env tags MINIO_IMAGE '${MINIO_IMAGE##*:}', deploy/local/infra.sh pins $pin: make them agree"
  mkdir -p "$bin_dir"

  host_bin="$(go env GOPATH)/bin/minio"
  if [[ "$(bin_version "$host_bin" "$MINIO_MODULE")" == "$pin" ]]; then
    minio=$host_bin
    info "minio: $host_bin ($pin, built by make infra)"
  else
    minio="$bin_dir/minio"
    if [[ "$(bin_version "$minio" "$MINIO_MODULE")" != "$pin" ]]; then
      info "go install $MINIO_MODULE@$pin (several minutes; log $LOG)"
      t0=$SECONDS
      run_logged images env CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$bin_dir" GOFLAGS="${GOFLAGS:-} -p=$INFRA_GO_BUILD_P" \
        nice -n 10 go install -ldflags="-s -w" "$MINIO_MODULE@$pin" || die "go install $MINIO_MODULE@$pin failed"
      info "built in $((SECONDS - t0)) s"
    fi
  fi
  mc="$bin_dir/mc"
  if [[ "$(bin_version "$mc" "$MC_MODULE")" == "$MC_VERSION" ]]; then
    info "mc: $mc ($MC_VERSION)"
  else
    info "go install $MC_MODULE@$MC_VERSION (a few minutes the first time; log $LOG)"
    t0=$SECONDS
    run_logged images env CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$bin_dir" GOFLAGS="${GOFLAGS:-} -p=$INFRA_GO_BUILD_P" \
      nice -n 10 go install -ldflags="-s -w" "$MC_MODULE@$MC_VERSION" || die "go install $MC_MODULE@$MC_VERSION failed"
    [[ "$(bin_version "$mc" "$MC_MODULE")" == "$MC_VERSION" ]] || die "$mc does not report $MC_VERSION"
    info "built in $((SECONDS - t0)) s"
  fi

  hash=$({ declare -f build_minio; dir_inputs "$SCRIPT_DIR/minio"; image_id "$BASE_IMAGE"; sha256sum "$minio" "$mc" | cut -d' ' -f1; } | hash_of)
  if fresh "$MINIO_IMAGE" "$hash" && fresh "$MC_IMAGE" "$hash"; then info "up to date"; return; fi
  ctx=$(new_context minio)
  cp "$SCRIPT_DIR/minio/Dockerfile" "$ctx/"
  cp "$minio" "$ctx/minio"
  cp "$mc" "$ctx/mc"
  docker_build "$MINIO_IMAGE" "$hash" "$ctx" --target minio
  docker_build "$MC_IMAGE" "$hash" "$ctx" --target mc
  rm -rf "$ctx"
  info "mc in $MC_IMAGE: $(docker run --rm "$MC_IMAGE" --version | head -n1)"
}

build_prometheus() {
  step "Prometheus: $PROMETHEUS_IMAGE (stand-in for prom/prometheus, Debian's prometheus)"
  local hash cid i v want=${PROMETHEUS_IMAGE##*:} rules=0 answer
  hash=$({ declare -f build_prometheus; dir_inputs "$SCRIPT_DIR/prometheus"; image_id "$BASE_IMAGE"; } | hash_of)
  if fresh "$PROMETHEUS_IMAGE" "$hash"; then info "up to date"; return; fi
  docker_build "$PROMETHEUS_IMAGE" "$hash" "$SCRIPT_DIR/prometheus"
  v=$(docker run --rm --entrypoint dpkg-query "$PROMETHEUS_IMAGE" -W -f '${Version}' prometheus)
  info "prometheus $v"
  # The tag is the upstream version (2.42.0 of 2.42.0+ds-5+deb12u1): a Debian update to
  # another upstream release must change local.env too.
  [[ "${v%%+*}" == "$want" ]] || die "$PROMETHEUS_IMAGE is tagged $want, but Debian's prometheus is $v: make local.env agree"

  # As compose runs it: its command (no --storage.tsdb.path) and the platform's alert rules.
  info "verify: compose's command with deploy/observability/alerts.yml; ready, the rules loaded, data in /prometheus"
  cid=$(docker run -d -v "$REPO_ROOT/deploy/observability/alerts.yml:/etc/prometheus/rules/agora-alerts.yml:ro" \
    "$PROMETHEUS_IMAGE" --config.file=/etc/prometheus/prometheus.yml --web.enable-lifecycle)
  # bash's /dev/tcp: the image has no HTTP client of its own.
  local get='exec 3<>/dev/tcp/127.0.0.1/9090 && printf "GET %s HTTP/1.0\r\n\r\n" "$0" >&3 && cat <&3'
  for ((i = 0; i < 60; i++)); do
    answer=$(docker exec "$cid" bash -c "$get" /-/ready 2>/dev/null || true)
    [[ "$answer" =~ ^HTTP/1\.[01]\ 200 ]] && break
    [[ "$(docker inspect -f '{{.State.Running}}' "$cid")" == true ]] || break
    sleep 1
  done
  if [[ "$answer" =~ ^HTTP/1\.[01]\ 200 ]]; then
    rules=$({ docker exec "$cid" bash -c "$get" /api/v1/rules || true; } | { grep -o '"type":"alerting"' || true; } | wc -l)
  fi
  if ! [[ "$answer" =~ ^HTTP/1\.[01]\ 200 ]] || ((rules == 0)) || ! docker exec "$cid" test -d /prometheus/wal; then
    docker logs --tail 30 "$cid" >&2 || true
    docker rm -f -v "$cid" >/dev/null
    die "$PROMETHEUS_IMAGE: not ready within 60 s, no alerting rule loaded ($rules), or no WAL in /prometheus (logs above)"
  fi
  docker rm -f -v "$cid" >/dev/null
  info "ok: ready, $rules alerting rules loaded, TSDB in /prometheus"
}

list() {
  CURRENT_STEP="list"
  local img id
  printf '  %-58s %-10s %s\n' IMAGE SIZE BUILT
  for img in "${IMAGES[@]}"; do
    id=$(image_id "$img")
    if [[ -z "$id" ]]; then printf '  %-58s %s\n' "$img" MISSING; continue; fi
    printf '  %-58s %-10s %s\n' "$img" \
      "$(docker image inspect -f '{{.Size}}' "$img" | awk '{printf "%.0f MB", $1 / 1e6}')" \
      "$(docker image inspect -f '{{.Created}}' "$img" | cut -c1-19)"
  done
}

cmd_check() {
  local img missing=()
  check_engine
  step "stand-in images (local.env)"
  for img in "${IMAGES[@]}"; do [[ -n "$(image_id "$img")" ]] || missing+=("$img"); done
  ((${#missing[@]} == 0)) || die "missing: ${missing[*]}: run 'make images' (deploy/docker/local/build.sh)"
  info "all ${#IMAGES[@]} present"
}

cmd_build() {
  local t0=$SECONDS
  [[ $EUID -eq 0 ]] || die "run as root (debootstrap, apt-get)"
  command -v go >/dev/null || die "go not found in PATH"
  mkdir -p "$WORK_DIR" "$LOG_DIR"
  check_engine
  build_base
  if ((NEED_GO_IMAGE)); then
    build_golang
  else
    step "Go builder: $GO_IMAGE: not needed (AGORA_BINARIES=prebuilt: the service images copy binaries compiled on the host)"
  fi
  build_runtime
  build_rabbitmq
  build_postgres
  build_minio
  build_prometheus
  step "remove superseded stand-ins (dangling images with the $LABEL label)"
  docker image prune -f --filter "label=$LABEL" >>"$LOG"
  list
  echo "==> images ready in $((SECONDS - t0)) s"
}

# The cluster test needs the RabbitMQ stand-in alone: not the Go builder (minutes cold), nor
# the PostgreSQL and MinIO ones (they need what `make infra` builds).
cmd_rabbitmq() {
  local t0=$SECONDS
  [[ $EUID -eq 0 ]] || die "run as root (debootstrap, apt-get)"
  mkdir -p "$WORK_DIR" "$LOG_DIR"
  check_engine
  build_base
  build_rabbitmq
  [[ -n "$(image_id "$RABBITMQ_IMAGE")" ]] || die "no $RABBITMQ_IMAGE after the build"
  echo "==> $RABBITMQ_IMAGE ready in $((SECONDS - t0)) s"
}

case "${1:-build}" in
  build) cmd_build ;;
  rabbitmq) cmd_rabbitmq ;;
  check) cmd_check ;;
  list) list ;;
  -h|--help|help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: $0 [build|rabbitmq|check|list]" >&2; exit 2 ;;
esac
