#!/usr/bin/env bash
# make compose-test: the platform in containers, proved by the e2e suites.
#
#   1. build the local stand-in images (deploy/docker/local/build.sh; seconds when warm)
#   2. compile the images' binaries once on the host (deploy/docker/binaries.sh), build the
#      service images around them (AGORA_BINARIES=prebuilt) and `docker compose up --wait` with the e2e layer
#      (deploy/compose/e2e.yml: spans and mails written to host directories), and of the
#      observability profile Prometheus alone
#   3. run the request-flow and document-flow suites against the published ports
#      (E2E_TARGET=compose: the harness reads ports, keys and mounts with docker inspect)
#   4. the dashboard check: once Prometheus has scraped every target, the suites again,
#      then every panel of deploy/observability/dashboards must have data in that
#      Prometheus (deploy/observability/panels_live_test.go)
#   5. print `docker compose ps` and each container's health
#   6. `down -v`, whatever happened
#
# COMPOSE_ENV picks the images and ports (default: the stand-ins, deploy/docker/local/local.env);
# an empty COMPOSE_ENV uses the public images on the default ports.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
COMPOSE_ENV=${COMPOSE_ENV-$root/deploy/docker/local/local.env}
WAIT=${COMPOSE_WAIT:-600}
work=$root/.data/compose-test
t0=$SECONDS

step() { echo "==> $* ($((SECONDS - t0)) s)"; }
die() { echo "!!! compose-test: $*" >&2; exit 1; }

timeout 10 docker info >/dev/null 2>&1 || die "no container engine answers (docker info): run 'make infra' (deploy/local/docker.sh)"
docker compose version >/dev/null 2>&1 || die "no 'docker compose' plugin: run 'make infra' (deploy/local/docker.sh)"

# A published port that something on the host already holds makes `up` fail at once with
# an error that is easy to lose in the output; name it before starting anything.
if [[ -n "$COMPOSE_ENV" ]]; then
  taken=()
  while IFS='=' read -r key port; do
    [[ "$key" == AGORA_*_PORT && "$port" =~ ^[0-9]+$ ]] || continue
    holder=$(ss -Htanp exclude time-wait "( sport = :$port )" 2>/dev/null | head -1)
    [[ -z "$holder" ]] || taken+=("$key=$port: $holder")
  done < "$COMPOSE_ENV"
  if (( ${#taken[@]} )); then
    printf '    %s\n' "${taken[@]}" >&2
    die "published ports already in use on this host (listed above): stop what holds them, or change them in $COMPOSE_ENV (is a stack from 'make compose-up' still running? 'make compose-down')"
  fi
fi

# The images' binaries: one go build on the host, with its module and build caches (after
# `make test`, the modules are there); the images only copy them (service.Dockerfile, prebuilt),
# and the Go builder stand-in is not needed. AGORA_BINARIES=build compiles them inside the Go
# image instead, as a plain `docker compose build` does.
export AGORA_BINARIES=${AGORA_BINARIES:-prebuilt}

compose=(docker compose -f docker-compose.yml -f e2e.yml)
[[ -n "$COMPOSE_ENV" ]] && compose+=(--env-file "$COMPOSE_ENV")

if [[ "$COMPOSE_ENV" == "$root/deploy/docker/local/local.env" ]]; then
  step "stand-in images (deploy/docker/local/build.sh)"
  bash deploy/docker/local/build.sh
fi

step "host directories for spans and mails in $work"
rm -rf "$work"
mkdir -p "$work/traces" "$work/mail"
# The services write spans as their own user (65532).
chmod 0777 "$work/traces"
export E2E_TRACES_DIR=$work/traces E2E_MAIL_DIR=$work/mail

step "development JWT keys in .data/jwt"
test -f .data/jwt/jwks.json || $GO run ./pkg/fabric/cmd/fabricctl token --keys-dir .data/jwt >/dev/null

down() {
  step "docker compose down -v"
  (cd deploy/compose && "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1) || echo "!!! compose down failed" >&2
}
trap down EXIT

status() {
  (cd deploy/compose && "${compose[@]}" ps -a)
  echo "health:"
  for id in $(cd deploy/compose && "${compose[@]}" ps -a -q); do
    docker inspect -f '  {{.Name}}: {{.State.Status}}{{if .State.Health}}, {{.State.Health.Status}}{{end}}{{if eq .State.Status "exited"}} (exit {{.State.ExitCode}}){{end}}' "$id"
  done
}

# What runs: the default services (those of no profile) and, of the observability profile,
# Prometheus alone: the dashboards are checked at their data source. Grafana, Jaeger and
# the OTel collector have no local stand-ins (Grafana is no Debian package) and stay down;
# the services write their spans to files (e2e.yml).
mapfile -t services < <(cd deploy/compose && "${compose[@]}" config --services)
((${#services[@]})) || die "docker compose config --services listed no service"
services+=(prometheus)
compose+=(--profile observability)

if [[ "$AGORA_BINARIES" == prebuilt ]]; then
  step "service binaries on the host (deploy/docker/binaries.sh)"
  GO=$GO bash deploy/docker/binaries.sh
fi
step "docker compose build (BINARIES=$AGORA_BINARIES)"
(cd deploy/compose && "${compose[@]}" build)
step "docker compose up --wait (at most $WAIT s)"
if ! (cd deploy/compose && "${compose[@]}" up -d --wait --wait-timeout "$WAIT" "${services[@]}"); then
  status
  (cd deploy/compose && "${compose[@]}" logs --tail 40) || true
  die "the stack did not come up healthy"
fi
step "stack healthy"
status

step "e2e suites against the containers (E2E_TARGET=compose)"
rc=0
(cd e2e && E2E_TARGET=compose $GO test -count=1 -timeout 15m -run '^(TestRequestFlow|TestDocumentFlow)$' ./) || rc=$?
step "after the suites"
status
[[ $rc -eq 0 ]] || die "e2e suites failed against the compose stack"

# The suites made the traffic `make demo` makes (and more): every dashboard panel must now
# show data (deploy/observability/panels_live_test.go). rate() never counts a series' first
# sample, and the suites take seconds: once Prometheus has scraped what they created, they
# run a second time, so that quantiles and ratios of rates are numbers, not NaN. The panel
# check waits for a scrape of every target, then retries empty panels for two minutes.
prom=$(cd deploy/compose && "${compose[@]}" port prometheus 9090) || die "prometheus publishes no port 9090"
export PROMETHEUS_URL="http://$prom"
step "Prometheus at $prom: every target scraped after the suites (TestPrometheusScrapedEveryTarget)"
$GO test -tags containers -count=1 -timeout 5m -run '^TestPrometheusScrapedEveryTarget$' ./deploy/observability/ \
  || die "Prometheus did not scrape every target (above)"
step "e2e suites, second run: traffic on series Prometheus holds"
(cd e2e && E2E_TARGET=compose $GO test -count=1 -timeout 15m -run '^(TestRequestFlow|TestDocumentFlow)$' ./) \
  || die "e2e suites failed against the compose stack (second run)"
step "dashboard panels against Prometheus (TestDashboardPanelsHaveData)"
$GO test -tags containers -count=1 -timeout 7m -v -run '^TestDashboardPanelsHaveData$' ./deploy/observability/ \
  || die "dashboard panels without data (listed above)"
step "compose-test passed"
