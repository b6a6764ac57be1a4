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
# Where the two binaries come from (BINARIES):
#   build     (default) compiled here, in the Go image, from the source: nothing but the tree
#             and the images is needed (the published pattern);
#   prebuilt  copied from .data/bin/images, where deploy/docker/binaries.sh compiled every
#             image's binaries in one `go build` on the host, the same way (static, -trimpath,
#             -s -w). `make compose-up` and `make compose-test` do that: the host's module and
#             build caches serve all nine images, and no image downloads a module or compiles.
#   bash deploy/docker/binaries.sh && docker build -f deploy/docker/service.Dockerfile \
#        --build-arg BINARIES=prebuilt --build-arg SERVICE=request --build-arg PORT=8081 -t agora/request .
# BuildKit builds only the stages the target needs: with prebuilt, the Go image is not used.
#
# No `# syntax=` line: the builder's own Dockerfile frontend (cache mounts included) is
# enough, and fetching a frontend image needs a registry. The base images are build
# arguments, pinned public images by default; a machine without registry access passes
# local stand-ins (deploy/docker/local, `make images`):
#   --build-arg GO_IMAGE=agora-local/golang:1.26-bookworm ... (deploy/docker/local/local.env)

ARG GO_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot
ARG BINARIES=build

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

# The same two files, compiled on the host by deploy/docker/binaries.sh (.data/bin/images is
# the one part of .data the build context keeps: service.Dockerfile.dockerignore).
FROM scratch AS prebuilt
ARG SERVICE
COPY .data/bin/images/${SERVICE} /out/app
COPY .data/bin/images/probe /out/probe

# The stage the runtime stages copy from: build or prebuilt.
FROM ${BINARIES} AS binaries

# document-worker shells out to tesseract and poppler: a slim Debian with
# those packages, same user and layout as the distroless image.
FROM ${DEBIAN_IMAGE} AS service-ocr
RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-por tesseract-ocr-eng poppler-utils ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
# After the packages: a build argument declared before a RUN is part of its cache key, and
# every image of this stage (document-worker, the mail sink) shares that layer.
ARG PORT=8080
COPY --from=binaries /out/app /usr/local/bin/service
COPY --from=binaries /out/probe /usr/local/bin/probe
ENV HTTP_ADDR=:${PORT}
EXPOSE ${PORT}
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["/usr/local/bin/probe"]
ENTRYPOINT ["/usr/local/bin/service"]

# Default target: distroless static, user nonroot (65532).
FROM ${RUNTIME_IMAGE} AS service
ARG PORT=8080
COPY --from=binaries /out/app /usr/local/bin/service
COPY --from=binaries /out/probe /usr/local/bin/probe
ENV HTTP_ADDR=:${PORT}
EXPOSE ${PORT}
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["/usr/local/bin/probe"]
ENTRYPOINT ["/usr/local/bin/service"]
