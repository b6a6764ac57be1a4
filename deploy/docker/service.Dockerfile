# One image pattern for every Agora service (build context: the repository root):
#
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=request --build-arg PORT=8081 -t agora/request .
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=document-worker --build-arg PORT=8084 \
#                --target service-ocr -t agora/document-worker .      # needs tesseract + poppler at run time
#
# The binary is static (CGO_ENABLED=0) and runs as an unprivileged user on a
# distroless base (no shell, no package manager). The health check is
# deploy/cmd/probe, a tiny static HTTP client copied beside the service:
# it GETs http://127.0.0.1$HTTP_ADDR/healthz, so the services need no flag for it.
#
# No `# syntax=` line: the builder's own Dockerfile frontend (cache mounts included) is
# enough, and fetching a frontend image needs a registry. The base images are build
# arguments, pinned public images by default; a machine without registry access passes
# local stand-ins (deploy/docker/local, `make images`):
#   --build-arg GO_IMAGE=agora-local/golang:1.26-bookworm ... (deploy/docker/local/local.env)

ARG GO_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
ARG SERVICE
# The main package to build; other commands of the repository (e.g.
# ./deploy/cmd/devcerts for the compose certificate job) reuse the pattern.
ARG TARGET=./services/${SERVICE}/cmd/${SERVICE}
RUN test -n "$SERVICE" || (echo "build with --build-arg SERVICE=<name>" >&2; exit 1)
WORKDIR /src
# go.work names every module, so the whole (filtered, see
# service.Dockerfile.dockerignore) tree is the build input; module downloads
# and the build cache survive between builds in cache mounts.
COPY . .
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/app "$TARGET" \
 && go build -ldflags="-s -w" -o /out/probe ./deploy/cmd/probe

# document-worker shells out to tesseract and poppler: a slim Debian with
# those packages, same user and layout as the distroless image.
FROM ${DEBIAN_IMAGE} AS service-ocr
ARG PORT=8080
RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-por tesseract-ocr-eng poppler-utils ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
COPY --from=build /out/app /usr/local/bin/service
COPY --from=build /out/probe /usr/local/bin/probe
ENV HTTP_ADDR=:${PORT}
EXPOSE ${PORT}
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["/usr/local/bin/probe"]
ENTRYPOINT ["/usr/local/bin/service"]

# Default target: distroless static, user nonroot (65532).
FROM ${RUNTIME_IMAGE} AS service
ARG PORT=8080
COPY --from=build /out/app /usr/local/bin/service
COPY --from=build /out/probe /usr/local/bin/probe
ENV HTTP_ADDR=:${PORT}
EXPOSE ${PORT}
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["/usr/local/bin/probe"]
ENTRYPOINT ["/usr/local/bin/service"]
