# latent-node — see README.md. Only Go is needed for build, test and run;
# `make wasm` needs wat2wasm (Debian: apt-get install wabt).
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 30s
BENCHCOUNT  ?= 6

.PHONY: all build test check ports bench fuzz stress run wasm clean

all: build

build:
	$(GO) build -o bin/latent-node ./cmd/latent-node

# The README's test command, two chains run side by side (make -j2), so
# that a cold first run keeps both cores busy:
#  - test-race: every package's tests under the race detector in short
#    mode, but those of test-binary and internal/importcheck (a static
#    check that make check runs);
#  - test-binary: builds one latent-node binary without the race detector
#    (as users run it), then the e2e tests against it (LATENT_NODE_E2E_BINARY)
#    together with the cluster tests (embedded etcd) and the fuel
#    rewriter's (one goroutine's byte transformation, 3x slower under the
#    race detector for nothing to watch), and the runner's TestRun_goGuest
#    tests (built only without -race: they compile the 3.5 MB Go guest with
#    wazero, 20-30 s under the race detector). The e2e test code only
#    drives the binary over HTTP, so the race detector has nothing of the
#    node's to watch there.
# TESTGOFLAGS compile and link without DWARF, children (the e2e binary, the
# wasip1 guests) included: a fifth less CPU on a cold cache, and no
# debugger reads these builds. The race chain lists only packages with
# tests: go test builds the others too, and two of them (cmd/cluster-demo,
# internal/testutil/etcdtest) would compile etcd's server under -race for
# nothing (make check type-checks every package, with or without tests).
TESTGOFLAGS := -gcflags=all=-dwarf=false -ldflags=-w
E2EBIN      := $(CURDIR)/bin/latent-node-e2e

test:
	@$(MAKE) --no-print-directory -j2 test-race test-binary

.PHONY: test-race test-binary
test-race test-binary: export GOFLAGS += $(TESTGOFLAGS)

test-race:
	$(GO) test -race -short -vet=off -timeout 9m $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e '/cluster$$' -e '/e2e$$' -e '/fuel$$' -e '/importcheck$$')

test-binary:
	$(GO) build -o $(E2EBIN) ./cmd/latent-node
	LATENT_NODE_E2E_BINARY=$(E2EBIN) $(GO) test -short -vet=off -timeout 6m ./cluster/ ./e2e/ ./runner/internal/fuel/
	$(GO) test -short -vet=off -timeout 3m -run '^TestRun_goGuest' ./runner/

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -count=1 ./internal/importcheck
	@cp go.mod /tmp/latent-go.mod.bak; cp go.sum /tmp/latent-go.sum.bak; \
		$(GO) mod tidy; \
		if ! git diff --quiet -- go.mod go.sum; then \
			echo "go mod tidy changed go.mod/go.sum:"; git diff -- go.mod go.sum; \
			cp /tmp/latent-go.mod.bak go.mod; cp /tmp/latent-go.sum.bak go.sum; exit 1; fi
	@$(MAKE) --no-print-directory ports

# The node builds on Windows, macOS and FreeBSD (the Linux-only facilities
# sit behind build tags with fallbacks): check keeps it so by building for
# Windows and type-checking every package, tests included, for each.
ports:
	GOOS=windows GOARCH=amd64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	GOOS=freebsd GOARCH=amd64 $(GO) vet ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) ./catalog/ ./admission/ ./scheduler/ ./cellpool/

# Each fuzz target runs for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeManifest$$' -fuzztime=$(FUZZTIME) ./vocab/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRecord$$' -fuzztime=$(FUZZTIME) ./catalog/
	$(GO) test -run='^$$' -fuzz='^FuzzValidateName$$' -fuzztime=$(FUZZTIME) ./vocab/
	$(GO) test -run='^$$' -fuzz='^FuzzParseOutboundHost$$' -fuzztime=$(FUZZTIME) ./vocab/
	$(GO) test -run='^$$' -fuzz='^FuzzRestore$$' -fuzztime=$(FUZZTIME) ./catalog/backup/
	$(GO) test -run='^$$' -fuzz='^FuzzInstrument$$' -fuzztime=$(FUZZTIME) ./runner/internal/fuel/
	$(GO) test -run='^$$' -fuzz='^FuzzGenerated$$' -fuzztime=$(FUZZTIME) ./runner/internal/fuel/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s ./node/config/
	$(GO) test -run='^$$' -fuzz='^FuzzAuthenticate$$' -fuzztime=$(FUZZTIME) ./node/auth/
	$(GO) test -run='^$$' -fuzz='^FuzzLimits$$' -fuzztime=$(FUZZTIME) ./runner/internal/fuel/
	$(GO) test -run='^$$' -fuzz='^FuzzHandlers$$' -fuzztime=$(FUZZTIME) ./node/
	$(GO) test -run='^$$' -fuzz='^FuzzReadBody$$' -fuzztime=$(FUZZTIME) ./node/
	$(GO) test -run='^$$' -fuzz='^FuzzCGIEnviron$$' -fuzztime=$(FUZZTIME) ./runner/wagi/
	$(GO) test -run='^$$' -fuzz='^FuzzPlan$$' -fuzztime=$(FUZZTIME) ./runner/internal/component/
	$(GO) test -run='^$$' -fuzz='^FuzzMerge$$' -fuzztime=$(FUZZTIME) ./runner/internal/coremerge/
	$(GO) test -run='^$$' -fuzz='^FuzzLift$$' -fuzztime=$(FUZZTIME) ./runner/internal/canon/

stress:
	$(GO) test -race -tags stress -timeout 60m ./stress/... ./e2e/...
	$(GO) test -tags stress -timeout 30m -run '^TestCluster' ./cluster/ ./e2e/

# Three nodes sharing one catalog through an embedded etcd, behind HAProxy
# when it is installed (deploy/haproxy/haproxy.cfg); see the README's
# cluster section. Runs until interrupted.
.PHONY: cluster-demo
cluster-demo: build
	$(GO) run ./cmd/cluster-demo -bin bin/latent-node

run:
	$(GO) run ./cmd/latent-node serve --demo

# Rebuild the WAT fixtures; a test checks the committed .wasm match.
wasm:
	@for f in testdata/wasm/*.wat; do \
		echo "wat2wasm $$f -o $${f%.wat}.wasm"; \
		wat2wasm "$$f" -o "$${f%.wat}.wasm" || exit 1; \
	done

clean:
	rm -rf bin

# The guest examples (examples/README.md): each into examples/<lang>/ with
# its own toolchain, as a command (<name>.wasm) and as a reactor
# (<name>-reactor.wasm); an example whose toolchain is missing is skipped with
# what to install (Debian: rustc libstd-rust-dev-wasm32 for Rust; clang-14
# lld-14 wasi-libc libclang-rt-14-dev-wasm32 for C; Node.js and npm for the
# JavaScript wasi:http component, whose build installs componentize-js).
.PHONY: examples
examples:
	@for lang in go rust c js; do \
		sh examples/build.sh $$lang examples/$$lang; rc=$$?; \
		if [ $$rc -ne 0 ] && [ $$rc -ne 3 ]; then exit $$rc; fi; \
	done

# The runner's speed against its peers: the latent runner, unmetered wazero
# and wasmtime-go with fuel on, side by side on the same guests; writes
# bench/results/runner.json (bench/README.md).
# The wasmtime peer is its own Go module (cgo, downloads wasmtime-go), so
# `make test` never builds it. Extra flags: BENCH_RUNNER_FLAGS="-rounds 11".
.PHONY: bench-runner
bench-runner:
	cd bench/peers/wasmtime && CGO_ENABLED=1 $(GO) build -o bin/wasmtime-peer .
	$(GO) run ./bench/runnerbench -peer bench/peers/wasmtime/bin/wasmtime-peer \
		-out bench/results/runner.json $(BENCH_RUNNER_FLAGS)

# Noisy-neighbour isolation and HTTP-path cost of the real binary: a quiet
# tenant's closed-loop client alone, next to 1..64 noisy clients and next to
# clients that ignore Retry-After; an open-loop quiet tenant at 10 % of
# capacity next to 16 noisy clients; Jain's index of 4 equal flooding tenants;
# an echo flood of the node against a bare net/http + wazero server and bare
# net/http. Writes bench/results/node.json and node.svg
# (bench/nodebench/README.md). About 8 minutes; a short run:
# BENCH_NODE_FLAGS="-duration 2s -rounds 1"; skip parts with -open-load 0
# -jain-tenants 0 -flood 0.
# The catalog's cost against its size: a real node filled with 100,000
# services through its HTTP API (deploy and invoke latency, allocated bytes
# per deploy, RSS, listing and restart time per block of 10,000), then a
# cluster node applying single changes from etcd at 100 and 100,000
# services (ratio-vs-100) and its relist (replace-ms).
.PHONY: bench-catalog
bench-catalog:
	$(GO) run ./bench/catalogbench -out bench/results/catalog.json -plot bench/results/catalog.svg $(BENCH_CATALOG_FLAGS)
	$(GO) test -run='^$$' -bench='^BenchmarkCluster_applyAtScale$$' -benchtime=100x -timeout=30m ./cluster/

# The wasi:http examples (examples/js, examples/rust/http.rs) on the real
# binary, fresh and from a snapshot, against jco serve (a fresh instance per
# request, and one shared instance) on the same machine in the same run;
# writes bench/results/components.json and components.svg. Needs Node.js
# and npm, and a rustc for WASI (examples/README.md). About 3 minutes
# after the first build; flags: BENCH_COMPONENTS_FLAGS="-rounds 5".
.PHONY: bench-components
bench-components:
	$(GO) run ./bench/componentbench $(BENCH_COMPONENTS_FLAGS)

.PHONY: bench-node
bench-node:
	$(GO) run ./bench/nodebench -out bench/results/node.json $(BENCH_NODE_FLAGS)

# Release binaries for linux/amd64 and linux/arm64 in dist/, with SHA256SUMS.
# Reproducible: no cgo, no paths (-trimpath), no build id, no VCS stamp, and
# the date is the commit's, so the same commit built by the same Go release
# gives the same bytes (a test in deploy/ checks it).
# Override: make dist VERSION=v1.2.3 DIST_PLATFORMS=linux/amd64 DISTDIR=out
DISTDIR        ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT         ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE           ?= $(shell git log -1 --format=%cI 2>/dev/null)
DIST_LDFLAGS    = -buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)

.PHONY: dist
dist:
	rm -rf $(DISTDIR) && mkdir -p $(DISTDIR)
	@for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "go build $$os/$$arch -> $(DISTDIR)/latent-node-$$os-$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOAMD64=v1 GOARM64=v8.0 \
			$(GO) build -trimpath -buildvcs=false -ldflags "$(DIST_LDFLAGS)" \
			-o $(DISTDIR)/latent-node-$$os-$$arch ./cmd/latent-node || exit 1; \
	done
	cd $(DISTDIR) && sha256sum latent-node-* > SHA256SUMS && cat SHA256SUMS
