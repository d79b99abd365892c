# iacp-node: see README.md. Every target works on a fresh machine that has only Go.
GO          ?= go
BIN         := bin/iacp-node
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/iacp-node/iacp-node/internal/cli.Version=$(VERSION)
# staticcheck is pinned and installed into ./bin by this Makefile.
STATICCHECK_VERSION := v0.7.0
STATICCHECK := bin/staticcheck-$(STATICCHECK_VERSION)
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s
DATA_DIR    ?= .data/node
RUN_FLAGS   ?=

.PHONY: all build run sim test lint fmt-check vet staticcheck chromium unit ts-test python-test python-bench fuzz bench bench-compare idle idle-floor clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/iacp-node

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
## client's tests when Node.js 20+ is installed and the Python client's when python3 is (each
## skipped with a message otherwise).
test: fmt-check vet staticcheck chromium unit ts-test python-test

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

unit:
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

## idle: the idle node (issue 20): time from exec until the local API serves, and RSS split into
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

clean:
	rm -rf bin .data
