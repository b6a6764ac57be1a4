# Agora — make targets. `make up` runs the platform, `make test` proves it.
# The platform runs on a Debian machine without Docker; `make infra`
# installs and starts what is missing (idempotent), a container engine for
# `make images compose-up` included.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
# Every module of the workspace, as package patterns (./pkg/fabric/... ...).
PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...' | sed "s|^$(CURDIR)|.|")
# Tests that restart the shared broker run alone, after everything else;
# the crash-safety suite runs on its own so its figures are printed.
DISRUPTIVE = TestBrokerRestart
CRASH = TestCrashSafety
export AMQP_URL ?= amqp://guest:guest@127.0.0.1:5672/
export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export S3_ENDPOINT ?= 127.0.0.1:9000

.PHONY: help infra infra-stop test test-unit bench fuzz lint tidy-check catalog-check generate generate-check up down status demo demo-documents demo-reactive token fabricctl

help:
	@echo "make up      start infrastructure, apply topology, start services (logs in .data/logs)"
	@echo "make down    stop what make up started"
	@echo "make idle-cost  CPU of the platform make up started, at rest (IDLE_SETTLE, IDLE_WINDOW)"
	@echo "make demo / demo-documents / demo-reactive   drive the platform make up started (a request; a document and the chat; subscriptions, decisions and a mass reaction)"
	@echo "make test    install missing infrastructure, then run every test against it"
	@echo "make bench   run the benchmarks (figures in docs/performance.md)"
	@echo "make fuzz    fuzz the envelope decoder, then each service's REST API, FUZZTIME each (default 30s)"
	@echo "make infra   install/start RabbitMQ management, PostgreSQL+pgvector, MinIO, tesseract"
	@echo "make lint    gofmt + go vet on every module, drift of every generated file, catalog compatibility gate"
	@echo "make generate  regenerate what is derived: sqlc query code; from the catalog, the topology file, broker grants, chart files and docs/asyncapi.json"
	@echo "make rules-check  promtool check + unit tests of the alert rules (installs promtool $(PROMTOOL_VERSION) once)"
	@echo "make images  build local stand-ins for the public images (no registry needed)"
	@echo "make compose-up / compose-down   the platform in containers (docker compose, stand-ins)"
	@echo "make test-containers  fabric tests + TestRequestFlow against RabbitMQ/PostgreSQL/MinIO containers (testcontainers-go)"

infra:
	bash deploy/local/infra.sh

infra-stop:
	bash deploy/local/infra.sh stop

SQLC_VERSION = v1.31.1
SQLC = $(shell $(GO) env GOPATH)/bin/sqlc

$(SQLC):
	@echo "installing sqlc $(SQLC_VERSION) (cgo build, ~3 min once)"
	GOFLAGS=-p=1 $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

# Regenerate everything derived: every service's query code from its queries/*.sql
# (sqlc), and from the catalog (pkg/fabric/catalog/catalog.yaml: definitions and the
# services' declarations) the platform topology file, the broker definitions and
# grants, the chart's files and docs/asyncapi.json (deploy/cmd/gendeploy).
generate: $(SQLC)
	@for f in services/*/sqlc.yaml; do echo "sqlc generate $$(dirname $$f)"; (cd $$(dirname $$f) && $(SQLC) generate); done
	$(GO) run ./deploy/cmd/gendeploy

# Every generated file must match its source: fails on drift.
generate-check: $(SQLC)
	@for f in services/*/sqlc.yaml; do (cd $$(dirname $$f) && $(SQLC) diff) || { echo "sqlc output of $$(dirname $$f) is stale: run make generate"; exit 1; }; done
	@$(GO) run ./deploy/cmd/gendeploy -check >/dev/null || { echo "a file derived from the catalog is stale: run make generate"; exit 1; }

# promtool, Prometheus's rule checker and rule unit-test runner, at PROMTOOL_VERSION: installed
# into GOPATH/bin when missing or of another version. remove_all_sd leaves out the cloud
# service-discovery plugins, which rule checks do not use (a large build all the same: many
# minutes once on 2 cores). deploy/observability's tests fail, never skip, without it;
# `make lint` (so `make test`) installs it.
.PHONY: promtool rules-check
PROMTOOL_VERSION = v0.316.0
PROMTOOL = $(shell $(GO) env GOPATH)/bin/promtool

promtool:
	@if $(GO) version -m $(PROMTOOL) 2>/dev/null | grep -Eq '^\s*mod\s+github\.com/prometheus/prometheus\s+$(PROMTOOL_VERSION)\s'; then \
		echo "promtool $(PROMTOOL_VERSION): $(PROMTOOL)"; \
	else \
		echo "installing promtool $(PROMTOOL_VERSION) into $(dir $(PROMTOOL)) (slow, once)"; \
		GOBIN=$(dir $(PROMTOOL)) nice -n 10 env GOFLAGS=-p=1 $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION); \
	fi

# The alert rules parse and fire as their unit tests say (deploy/observability, docs/runbooks.md).
rules-check: promtool
	cd deploy/observability && $(PROMTOOL) check rules alerts.yml && $(PROMTOOL) test rules alerts_test.yml

# The message catalog may only change compatibly (docs/contract-evolution.md):
# compared with where this branch left main, or with HEAD on main itself.
FABRICCTL_RUN ?= $(GO) run ./pkg/fabric/cmd/fabricctl
CATALOG_BASE ?= $(shell git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main 2>/dev/null || echo HEAD)

catalog-check:
	$(FABRICCTL_RUN) catalog check --against $(CATALOG_BASE)

# The official AsyncAPI 3.0.0 JSON Schema (npm package @asyncapi/specs, pinned), which
# pkg/fabric/internal/asyncapi's test validates the generated document against.
ASYNCAPI_SPECS_VERSION = 6.11.1
export ASYNCAPI_SCHEMA := $(CURDIR)/.data/tools/asyncapi-specs-$(ASYNCAPI_SPECS_VERSION)/3.0.0.json

asyncapi-schema: $(ASYNCAPI_SCHEMA)

$(ASYNCAPI_SCHEMA):
	@command -v npm >/dev/null || { echo "npm is needed to fetch @asyncapi/specs: apt-get install npm"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	(cd $$tmp && npm pack --silent @asyncapi/specs@$(ASYNCAPI_SPECS_VERSION) >/dev/null && tar xzf asyncapi-specs-$(ASYNCAPI_SPECS_VERSION).tgz) && \
	mkdir -p $(dir $(ASYNCAPI_SCHEMA)) && cp "$$tmp/package/schemas/3.0.0-without-\$$id.json" $(ASYNCAPI_SCHEMA) && \
	echo "fetched the AsyncAPI 3.0.0 schema into $(ASYNCAPI_SCHEMA)"

# Every module's go.mod and go.sum are as `go mod tidy` leaves them. go mod tidy works on
# the module of the directory it runs in and ignores go.work (golang/go#50750): each
# module's replace directives point at its siblings, so it runs as is, GOWORK or not.
tidy-check:
	@untidy=""; \
	for dir in $$($(GO) list -m -f '{{.Dir}}'); do \
		mod=$${dir#$(CURDIR)/}; \
		(cd "$$dir" && $(GO) mod tidy -diff) || { echo "$$mod: go.mod/go.sum are not tidy (diff above): run go mod tidy in $$mod"; untidy="$$untidy $$mod"; }; \
	done; \
	if [ -n "$$untidy" ]; then echo "not tidy:$$untidy"; exit 1; fi

# The OpenAPI documents as each service serves them (docs/openapi/, make generate) and
# docs/asyncapi.json, linted by Redocly CLI pinned in deploy/lint (rules: deploy/lint/redocly.yaml;
# Node.js and the npm ci by deploy/lint/api-lint.sh, idempotent).
.PHONY: api-lint
api-lint:
	bash deploy/lint/api-lint.sh

lint: generate-check api-lint catalog-check rules-check tidy-check
	@unformatted=$$(gofmt -l pkg services e2e deploy 2>/dev/null || true); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# make test = infra + lint + every test. The disruptive broker-restart test
# runs last and alone so no other package sees the broker go away.
test: asyncapi-schema
test: infra lint
	$(GO) test -count=1 -timeout 20m -skip '$(DISRUPTIVE)|$(CRASH)' $(PKGS)
	$(GO) test -count=1 -timeout 10m -run '$(CRASH)' -v ./pkg/fabric/crashsafety/
	$(GO) test -count=1 -timeout 5m -run '$(DISRUPTIVE)' -v ./pkg/fabric/

test-unit:
	$(GO) test -count=1 -short ./pkg/fabric/envelope/ ./pkg/fabric/registry/

# Fuzzing, one target after the other, FUZZTIME each: the envelope decoder, then each
# service's REST API (FuzzHTTP in services/<svc>/cmd/<svc>/fuzz_test.go: the real service
# against the real infrastructure, as in `make test`, which runs the seeds). One worker per
# target, since every worker starts its own instance of the service. A finding fails the
# run and is written to that package's testdata/fuzz/FuzzHTTP/. Go 1.26's coordinator may
# end a clean run at the deadline with a bare "context deadline exceeded" (golang/go#75804,
# fixed in Go 1.27); with nothing written, that is said and not counted as a finding.
FUZZTIME ?= 30s
FUZZ_SERVICES = request workflow communication ai-builder datalake-ingestion analytics document-worker

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeEnvelope -fuzztime $(FUZZTIME) ./pkg/fabric/envelope/
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for s in $(FUZZ_SERVICES); do \
		corpus=services/$$s/cmd/$$s/testdata/fuzz/FuzzHTTP; \
		before=$$( (ls $$corpus 2>/dev/null || true) | wc -l); \
		echo "==> FuzzHTTP $$s ($(FUZZTIME))"; \
		if (cd services/$$s && $(GO) test -run '^$$' -fuzz '^FuzzHTTP$$' -fuzztime $(FUZZTIME) \
			-fuzzminimizetime 5s -parallel 1 ./cmd/$$s/) 2>&1 | tee $$log; then continue; fi; \
		after=$$( (ls $$corpus 2>/dev/null || true) | wc -l); \
		if [ "$$after" = "$$before" ] && grep -q 'now fuzzing with' $$log && \
			[ "$$(grep -A1 '^--- FAIL: FuzzHTTP (' $$log | tail -n 1)" = '    context deadline exceeded' ]; then \
			echo "==> $$s: no finding; the coordinator's deadline race (golang/go#75804)"; continue; fi; \
		exit 1; \
	done

bench: infra
	$(GO) test -run '^$$' -bench . -benchtime 3s -count 1 -timeout 30m $(PKGS)

fabricctl:
	$(GO) build -o bin/fabricctl ./pkg/fabric/cmd/fabricctl

# A local-development token: make token TENANT=org-a SUB=citizen-1 ROLES=citizen
TENANT ?= org-demo
SUB ?= citizen-demo
ROLES ?= citizen
token: fabricctl
	@bin/fabricctl token --tenant $(TENANT) --sub $(SUB) --roles $(ROLES)

up: infra
	bash deploy/local/up.sh up

down:
	bash deploy/local/up.sh down

status:
	bash deploy/local/up.sh status

# What the platform make up started costs at rest: after IDLE_SETTLE of quiet, the CPU time
# of its every process (services, RabbitMQ, PostgreSQL's server and the agora database's
# backends, MinIO) over IDLE_WINDOW, per component and in total, as % of one core
# (deploy/cmd/idlecost; figures in docs/performance.md, "At rest").
IDLE_SETTLE ?= 60s
IDLE_WINDOW ?= 60s
.PHONY: idle-cost
idle-cost:
	$(GO) run ./deploy/cmd/idlecost -settle $(IDLE_SETTLE) -window $(IDLE_WINDOW)

# The demos talk to the services make up started.
demo:
	$(GO) run ./e2e/cmd/demo

demo-documents:
	$(GO) run ./e2e/cmd/demo -documents

# The reactive fabric's two slices (seed 004 §87-88), each decision printed with its reason.
demo-reactive:
	$(GO) run ./e2e/cmd/demo -reactive

# ---- deploy (issue 6) --------------------------------------------------------
.PHONY: certs deploy-validate

# Development CA + broker server and client certificates in .data/certs (idempotent;
# `make infra` also runs it through deploy/local/tls.sh).
certs:
	$(GO) run ./deploy/cmd/devcerts -out .data/certs

# Generated files up to date, compose file, Helm chart and Dockerfile valid (no Docker needed).
deploy-validate:
	$(GO) run ./deploy/cmd/gendeploy -check
	$(GO) test -count=1 -run 'Compose|Chart|Decode|Dockerfile|Binaries|Committed|Agree|Anchored|Build' \
		./deploy/acl/ ./deploy/postgres/ ./deploy/compose/ ./deploy/manifest/ ./deploy/docker/

# ---- containers (issue 11) ---------------------------------------------------
.PHONY: images compose-up compose-down

# Compose against local stand-ins of the public images (no registry reachable here):
# deploy/docker/local/local.env names them and moves the published ports away from the
# machine's own services. COMPOSE_ENV= (empty) runs the public images on the default ports.
COMPOSE_ENV ?= $(CURDIR)/deploy/docker/local/local.env
COMPOSE = docker compose $(if $(COMPOSE_ENV),--env-file $(COMPOSE_ENV))
COMPOSE_WAIT ?= 600
JWT_DIR = $(CURDIR)/.data/jwt

# The engine (dockerd and the compose plugin) comes from `make infra` (deploy/local/docker.sh).
define need_engine
	@timeout 10 docker info >/dev/null 2>&1 || { echo "!!! no container engine answers (docker info): run 'make infra' (deploy/local/docker.sh)" >&2; exit 1; }
	@docker compose version >/dev/null 2>&1 || { echo "!!! no 'docker compose' plugin: run 'make infra' (deploy/local/docker.sh)" >&2; exit 1; }
endef

# Stand-ins for the public images, built from Debian's packages and this machine's Go
# (deploy/docker/local/README.md); idempotent, seconds when nothing changed.
images:
	$(need_engine)
	bash deploy/docker/local/build.sh

# Compiles the images' binaries on the host (one go build), builds the service images around
# them (service.Dockerfile, BINARIES=prebuilt), starts everything and waits until every
# service is healthy and every one-shot job has completed.
compose-up:
	$(need_engine)
	@if [ "$(COMPOSE_ENV)" = "$(CURDIR)/deploy/docker/local/local.env" ]; then AGORA_BINARIES=prebuilt bash deploy/docker/local/build.sh check; fi
	@echo "==> development JWT keys in .data/jwt (the services read jwks.json)"
	@test -f $(JWT_DIR)/jwks.json || $(GO) run ./pkg/fabric/cmd/fabricctl token --keys-dir $(JWT_DIR) >/dev/null
	@echo "==> service binaries, compiled once on the host (deploy/docker/binaries.sh)"
	GO=$(GO) bash deploy/docker/binaries.sh
	@echo "==> docker compose build ($(if $(COMPOSE_ENV),$(COMPOSE_ENV),public images); the images copy those binaries)"
	cd deploy/compose && AGORA_BINARIES=prebuilt $(COMPOSE) build
	@echo "==> docker compose up --wait (at most $(COMPOSE_WAIT) s)"
	cd deploy/compose && $(COMPOSE) up -d --wait --wait-timeout $(COMPOSE_WAIT) \
		|| { $(COMPOSE) ps -a; echo "!!! compose up failed: see 'cd deploy/compose && $(COMPOSE) logs SERVICE'" >&2; exit 1; }
	cd deploy/compose && $(COMPOSE) ps -a

compose-down:
	$(need_engine)
	cd deploy/compose && $(COMPOSE) down -v --remove-orphans

# The platform in containers, proved: stand-ins built, `docker compose up --wait` with the
# e2e layer, the request-flow and document-flow suites against the published ports,
# `docker compose ps` and health printed, `down -v` (deploy/compose/compose-test.sh).
.PHONY: compose-test cluster-test
compose-test:
	COMPOSE_ENV="$(COMPOSE_ENV)" COMPOSE_WAIT=$(COMPOSE_WAIT) GO=$(GO) bash deploy/compose/compose-test.sh

# A 3-node RabbitMQ cluster in containers (testcontainers-go): the leader stopped
# mid-publish, then a node cut off the network; prints confirmed, lost, duplicated effects.
# With the stand-ins (local.env) the RabbitMQ one is built first (build.sh rabbitmq: seconds
# when warm; on a clean machine the debootstrap base and Debian's rabbitmq-server, a few
# minutes). CI runs it (.ci/run). It fails, never skips: without an engine or the image, and
# unless the test ran and passed. The whole output is in .data/logs/cluster-test.log, printed
# (less the clients' INFO lines) when it fails.
CLUSTER_LOG = $(CURDIR)/.data/logs/cluster-test.log
cluster-test:
	$(need_engine)
	@if [ "$(COMPOSE_ENV)" = "$(CURDIR)/deploy/docker/local/local.env" ]; then bash deploy/docker/local/build.sh rabbitmq; fi
	@mkdir -p $(dir $(CLUSTER_LOG)); t0=$$SECONDS; \
	image=$$(sed -n 's/^RABBITMQ_IMAGE=//p' $(or $(COMPOSE_ENV),/dev/null) | grep . || echo rabbitmq:3.13-management); \
	echo "==> TestClusterSurvivesLeaderLossAndPartition with $$image (log $(CLUSTER_LOG))"; \
	rc=0; (cd e2e && RABBITMQ_IMAGE=$$image $(GO) test -tags containers -count=1 -timeout 15m \
		-run '^TestClusterSurvivesLeaderLossAndPartition$$' -v ./) >$(CLUSTER_LOG) 2>&1 || rc=$$?; \
	grep -E '^(=== RUN|--- |PASS|FAIL|ok)|cluster_test.go' $(CLUSTER_LOG) || true; \
	if [ $$rc -ne 0 ] || ! grep -q '^--- PASS: TestClusterSurvivesLeaderLossAndPartition ' $(CLUSTER_LOG); then \
		echo "--- full output, less the clients' INFO lines ($(CLUSTER_LOG)):"; grep -v 'level=INFO' $(CLUSTER_LOG) || true; \
		echo "!!! cluster-test failed (go test exit $$rc) after $$((SECONDS - t0)) s" >&2; exit 1; \
	fi; \
	echo "==> cluster-test passed in $$((SECONDS - t0)) s"

# The infrastructure in containers (testcontainers-go, e2e/testinfra): RabbitMQ, PostgreSQL with
# pgvector and MinIO from the stand-in images, on random ports of 127.0.0.1. The fabric's
# packages that need the broker and the database run against the containers of `testinfra up`,
# then TestRequestFlow with E2E_INFRA=containers (the harness starts a set of its own). No
# reaper (Ryuk): the trap removes both sets by label, pass or fail. TestBrokerRestart (skipped)
# and the crash-safety suite (not listed) stop the machine's broker with its own rabbitmqctl.
TESTINFRA = $(CURDIR)/.data/bin/testinfra
TESTINFRA_ENV = $(CURDIR)/.data/testinfra.env
TESTINFRA_FABRIC = ./pkg/fabric/ ./pkg/fabric/outbox/ ./pkg/fabric/inbox/ ./pkg/fabric/internal/dlq/ ./pkg/fabric/broker/ \
	./pkg/fabric/retention/ ./pkg/fabric/ratelimit/ ./pkg/fabric/tenant/
.PHONY: test-containers
test-containers:
	@timeout 10 docker info >/dev/null 2>&1 || { echo "!!! no container engine answers (docker info): run 'make infra' (deploy/local/docker.sh)" >&2; exit 1; }
	@mkdir -p $(dir $(TESTINFRA))
	$(GO) build -o $(TESTINFRA) ./e2e/cmd/testinfra
	@run=mk-$$$$; t0=$$SECONDS; \
	trap '$(TESTINFRA) down -run '$$run'; $(TESTINFRA) down -run '$$run'-e2e; rm -f $(TESTINFRA_ENV); echo "==> test-containers: $$((SECONDS - t0)) s"' EXIT; \
	$(TESTINFRA) up -run $$run -env-file $(TESTINFRA_ENV); \
	set -a; . $(TESTINFRA_ENV); set +a; \
	docker ps --filter label=agora.testinfra.run=$$run --format 'table {{.Names}}\t{{.Image}}\t{{.Ports}}'; \
	echo "==> fabric tests against AMQP $$AMQP_HOST, management $$RABBITMQ_MGMT_URL, PostgreSQL $${DATABASE_URL#*@}"; \
	$(GO) test -count=1 -timeout 10m -run '^Test' -skip '^($(DISRUPTIVE)|$(CRASH))$$' $(TESTINFRA_FABRIC); \
	echo "==> TestRequestFlow with E2E_INFRA=containers"; \
	cd e2e && E2E_INFRA=containers E2E_INFRA_RUN=$$run-e2e $(GO) test -count=1 -timeout 10m -run '^TestRequestFlow$$' -v ./ 2>&1 \
		| grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|harness: |testinfra'
