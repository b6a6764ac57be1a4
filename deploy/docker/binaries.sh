#!/usr/bin/env bash
# deploy/docker/binaries.sh - the binaries of every image that deploy/compose builds, compiled
# once on the host (`make compose-up` and `make compose-test` run it before `docker compose build`).
#
#   bash deploy/docker/binaries.sh [OUT_DIR]    # default .data/bin/images
#   bash deploy/docker/binaries.sh --list       # the file names it writes, one a line
#
# One `go build` of every command the service images run, with the host's module and build
# caches: each shared package compiles once for all of them, and a second run takes seconds.
# Built exactly as service.Dockerfile's `build` stage builds them: static (CGO_ENABLED=0),
# -trimpath, -ldflags "-s -w". The Dockerfile's `prebuilt` stage (compose's BINARIES=prebuilt,
# which those make targets set through AGORA_BINARIES) copies OUT_DIR/<SERVICE> and
# OUT_DIR/probe into the image instead of compiling them inside a Go image.
# deploy/docker/docker_test.go runs it (into .data/bin/images, so `make test` leaves the
# binaries it checked for the next compose build, which then links nothing) and checks that
# every build of the compose file names a binary listed here and that they are all static.
set -Eeuo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/.data/bin/images}
GO=${GO:-go}
if ! command -v "$GO" >/dev/null && [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi

# The file name is the package's directory name, which is the SERVICE build argument of its
# image in deploy/compose/docker-compose.yml.
TARGETS=(
  ./services/request/cmd/request
  ./services/workflow/cmd/workflow
  ./services/communication/cmd/communication
  ./services/document-worker/cmd/document-worker
  ./services/ai-builder/cmd/ai-builder
  ./services/datalake-ingestion/cmd/datalake-ingestion
  ./services/analytics/cmd/analytics
  ./services/workflow/cmd/seifake        # the SEI stand-in workflow calls
  ./services/communication/cmd/smtpsink  # the mail sink
  ./deploy/cmd/devcerts                  # the certs job
  ./deploy/cmd/probe                     # every image's health check
)

if [[ "$out" == --list ]]; then printf '%s\n' "${TARGETS[@]##*/}"; exit 0; fi

mkdir -p "$out"
t0=$SECONDS
echo "    go build of ${#TARGETS[@]} commands into $out (CGO_ENABLED=0, -trimpath, -ldflags '-s -w')"
(cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags="-s -w" -o "$out/" "${TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  [[ -x "$out/${t##*/}" ]] || { echo "!!! binaries.sh: go build produced no $out/${t##*/}" >&2; exit 1; }
done
echo "    built in $((SECONDS - t0)) s: $(cd "$out" && du -ch "${TARGETS[@]##*/}" | tail -n1 | cut -f1) in all"
