# iacp-node: see README.md. Every target works on a fresh machine that has only Go.
GO          ?= go
BIN         := bin/iacp-node
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli.Version=$(VERSION)
# staticcheck is pinned and installed into ./bin by this Makefile.
STATICCHECK_VERSION := v0.7.0
STATICCHECK := bin/staticcheck-$(STATICCHECK_VERSION)
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s
DATA_DIR    ?= .data/node
RUN_FLAGS   ?=

.PHONY: all build static run sim test lint fmt-check vet staticcheck chromium unit netlab-deps netlab ts-test python-test interop-test python-bench fuzz bench bench-compare bench-memory idle idle-floor clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/iacp-node

## static: bin/iacp-node-static, linked statically (no cgo), for deploy/Dockerfile (FROM scratch);
## the e2e tests run this build.
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o bin/iacp-node-static ./cmd/iacp-node

## run: one node on embedded defaults, data in $(DATA_DIR) (created on first start).
run: build
	@test -f $(DATA_DIR)/config.yaml || ./$(BIN) init --data-dir $(DATA_DIR)
	./$(BIN) run --data-dir $(DATA_DIR) $(RUN_FLAGS)

## sim: the default simulator scenario (smoke: 10 real nodes on an in-memory network, every
## feature once); SIM_FLAGS adds flags, e.g. SIM_FLAGS="--scenario mesh-100 --html sim.html".
SIM_FLAGS ?=
sim: build
	./$(BIN) sim $(SIM_FLAGS)

## test: formatting, vet, staticcheck, every Go test under the race detector (with Chromium
## for the simulator's HTML report, installed first when it can be), then the TypeScript
## client's tests when Node.js 20+ is installed, the Python client's when python3 is, and the
## interop tests when npm can install their packages (each skipped with a message otherwise).
test: fmt-check vet staticcheck chromium unit ts-test python-test interop-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

$(STATICCHECK):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin/.sc $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/.sc/staticcheck $@ && rm -rf bin/.sc

staticcheck: $(STATICCHECK)
	./$(STATICCHECK) ./...

unit: netlab-deps
	$(GO) test -race -timeout 15m ./...

## chromium: Debian's chromium, in which a test renders the simulator's HTML report
## (sim/report_browser_test.go); installed with apt-get when absent and this is root, else
## that test skips and says why.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium: installing Debian's chromium for the simulator's HTML report test"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "chromium: could not be installed; the HTML report test will skip"; \
	else \
		echo "chromium: not installed, and installing it needs root and apt-get; the HTML report test will skip"; \
	fi

## netlab-deps: what the network lab (e2e/netlab) needs besides root and iproute2: nftables,
## installed with apt-get when it is missing and the machine allows it (root, apt). Without it
## the lab's tests skip and say why.
netlab-deps:
	@if command -v nft >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "netlab-deps: installing nftables for the network lab"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables) >/dev/null 2>&1 \
			|| echo "netlab-deps: could not install nftables; the network lab will skip"; \
	else \
		echo "netlab-deps: nft is not installed and this is not a root machine with apt-get; the network lab will skip"; \
	fi

## netlab: the network lab's full measurements (docs/bench.md "Across NATs"): 20 hole punches
## per NAT type, a relay killed, a one-minute partition, a laptop moving networks; the
## report goes to NETLAB_REPORT. Needs root, ip netns and nft (netlab-deps); about 5 minutes.
NETLAB_REPORT ?= netlab-report.md
netlab: netlab-deps
	$(GO) test -count=1 -timeout 15m ./e2e/netlab -run 'TestNAT_' -v -args -netlab.full -netlab.report $(abspath $(NETLAB_REPORT))

## ts-test: the TypeScript client's tests (clients/typescript, node --test against its committed
## dist/) with two real nodes of bin/iacp-node; skipped with a message without Node.js 20+.
ts-test: build
	@if command -v node >/dev/null 2>&1 && node -e 'process.exit(parseInt(process.versions.node) >= 20 ? 0 : 1)'; then \
		cd clients/typescript && IACP_NODE_BINARY=$(CURDIR)/$(BIN) node --test test/*.test.mjs; \
	else \
		echo "ts-test: skipped: Node.js 20+ is not installed (the TypeScript client needs it)"; \
	fi

## python-test: the Python client (clients/python, standard library only: nothing to install)
## against two real nodes of this build; about 5 s.
PYTHON ?= python3
python-test: build
	@if ! command -v $(PYTHON) >/dev/null 2>&1; then \
		echo "python-test: skipped: $(PYTHON) is not installed (the Python client needs Python 3.9+)"; \
	elif ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then \
		echo "python-test: skipped: $$($(PYTHON) --version 2>&1) is older than the Python client's 3.9"; \
	else \
		cd clients/python && IACP_NODE_BINARY=$(CURDIR)/$(BIN) $(PYTHON) -m unittest discover -s tests -v; \
	fi

## interop-test: the A2A bridge and the MCP server with clients the project did not write:
## @a2a-js/sdk 1.x (A2A 1.0) and 0.3 (A2A 0.3), @modelcontextprotocol/sdk (interop/). npm
## installs them into interop/node_modules (git-ignored) from interop/package-lock.json, again
## only when the lock file changed; skipped with a message without Node.js 20+ and npm, or
## when npm cannot install them (no registry). About 10 s.
interop-test: build
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1 || ! node -e 'process.exit(parseInt(process.versions.node) >= 20 ? 0 : 1)'; then \
		echo "interop-test: skipped: Node.js 20+ and npm are not installed (the A2A and MCP SDKs need them)"; \
	elif ! (cd interop && { test node_modules/.interop-ok -nt package-lock.json 2>/dev/null || { npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.interop-ok; }; }); then \
		echo "interop-test: skipped: npm could not install interop/'s packages (is the npm registry reachable?)"; \
	else \
		cd interop && IACP_NODE_BINARY=$(CURDIR)/$(BIN) node --test test/*.test.mjs; \
	fi

## idle: the idle node: time from exec until the local API serves, and RSS split into
## the node's own (anonymous) memory and the binary's pages, ROUNDS runs (docs/node.md).
idle: build
	bench/idle.sh $(BIN)

## idle-floor: the same measure of a bare go-libp2p host on its defaults (bench/barehost, from
## the bench/ module), the floor under the node's: what go-libp2p alone costs on this machine.
idle-floor:
	cd bench && $(GO) build -o ../bin/barehost ./barehost
	FLOOR=1 bench/idle.sh bin/barehost

## python-bench: a request through the Python client against raw HTTP, p50 of each (BENCH_N
## requests a side).
BENCH_N ?= 1000
python-bench: build
	cd clients/python && IACP_NODE_BINARY=$(CURDIR)/$(BIN) $(PYTHON) bench.py -n $(BENCH_N)

## fuzz: every fuzz target for $(FUZZTIME) each.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $$f); \
		for t in $$(grep -oE '^func Fuzz[A-Za-z0-9_]+' $$f | sed 's/^func //'); do \
			echo "== $$dir $$t"; \
			$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$dir; \
		done; \
	done

## bench: every benchmark; see docs/ for what each measures.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -timeout 60m ./...

## bench-compare: IACP against a raw libp2p echo and NATS (plain, signed as IACP signs, and
## JetStream) in interleaved rounds, from the bench/ module, whose own go.mod keeps NATS out
## of the node's. Not part of `make test`. BENCH_FLAGS sets the sizes, e.g. BENCH_FLAGS="-rounds
## 5" (defaults: -rounds 10 -requests 500 -oneway 2000 -senders 256); see docs/bench.md.
BENCH_FLAGS ?=
bench-compare:
	cd bench && $(GO) test -run='^$$' -bench=. -benchtime=1x -timeout 60m -args $(BENCH_FLAGS)

## bench-memory: the real binary's peak RSS (VmHWM) while N peers on 127.0.0.1 send it signed
## messages of almost 16 MiB at once, in open and in authority mode (e2e BenchmarkMemory;
## docs/bench.md, "Memory under a burst of large messages"). MEMORY_FLAGS sets the sizes, e.g.
## MEMORY_FLAGS="-memory.senders 8 -memory.messages 1 -memory.limit 256MiB". About 10 minutes.
MEMORY_FLAGS ?= -memory.senders 8,40 -memory.messages 6
bench-memory:
	$(GO) test ./e2e -run='^$$' -bench=BenchmarkMemory -benchtime=1x -timeout 60m -args $(MEMORY_FLAGS)

clean:
	rm -rf bin .data
