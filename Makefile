# Simba for Go. `make help` lists the targets.

GO ?= go

.PHONY: help services services-down test soak reliability demo bench compare generate lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

services: ## install (if missing) and start Redis, PostgreSQL, ZooKeeper and MariaDB on loopback
	bash scripts/services.sh up

services-down: ## stop the servers that `make services` started
	bash scripts/services.sh down

# Nested modules (a go.mod of their own, so the root module does not inherit
# their dependencies): make test and make lint run them too, one line each.
# bench/, the side-by-side comparison, has lines of its own: its tests run
# with -short (the smoke test), and `make compare` runs the comparison.
NESTED := \
	backends/etcd \
	examples \
	extra/simbaprometheus \
	extra/simbaotel \
	tests

# tests/ runs one package at a time (-p 1), never beside a compile: its
# multi-process fault schedules run six lanes of node processes on 1.5 s
# leases, and a test binary compiled beside them on a cold build cache (the
# first run after a change) starved them into timeouts past the schedules'
# liveness bound.
TESTS_P := -p 1

# SIMBA_REQUIRE_SERVICES=1: a test whose server is missing fails instead of skipping.
test: services lint ## start the servers, vet, check gofmt, run every test with -race (nested modules too)
	SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 15m ./...
	@for m in $(NESTED); do echo "== $$m"; p=; [ $$m = tests ] && p="$(TESTS_P)"; \
		(cd $$m && SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 10m $$p ./...) || exit 1; done
	@echo "== ZooKeeper's fault and ensemble tests, without -race (go-zookeeper v1.0.4 races on Conn.lastZxid when it reconnects with a watch armed, upstream go-zookeeper/zk#35; see backends/zookeeper/fault_test.go)"
	SIMBA_REQUIRE_SERVICES=1 $(GO) test -count=1 -timeout 10m -run '$(ZK_FAULTS)' ./backends/zookeeper/
	cd tests && SIMBA_REQUIRE_SERVICES=1 $(GO) test -count=1 -timeout 10m ./zookeeper/
	@echo "== bench (the comparison's smoke test: every row once)"
	cd bench && SIMBA_REQUIRE_SERVICES=1 $(GO) test -short -count=1 -timeout 5m ./...
	@echo "== simulator: $(SIM_TEST) seeded schedules within drift, and beyond it (without -race, which slows it tenfold)"
	$(GO) test -count=1 -timeout 10m ./runtime/internal/sim -run 'TestSim$$|TestSimBeyondDrift' -sim.schedules=$(SIM_TEST)

# The ZooKeeper backend's fault tests (they build without -race).
ZK_FAULTS := Test(Server|Cut|Delayed|Session|Expired|Parent|Shortened|Engine)

# Schedules the simulator runs in make test (kept to the 15-minute budget of
# make test on 2 cores), in make reliability, and in make soak.
SIM_TEST ?= 40000
SIM_CI ?= 100000
SIM_SOAK ?= 1000000

# Multi-process fault schedules per backend (tests/faults): make test runs
# the package's default (12 per backend, 2 faults each); make soak runs
# FAULTS_SOAK longer ones, make reliability FAULTS_CI and prints the figures.
FAULTS_CI ?= 20
FAULTS_SOAK ?= 300
FAULTS_SOAK_FAULTS ?= 6

soak: services ## long runs: the simulator's million schedules, the ZooKeeper fault and ensemble tests many times over, 300 fault schedules per backend (an hour or so)
	$(GO) test -count=1 -timeout 120m ./runtime/internal/sim -run 'TestSim$$' -sim.schedules=$(SIM_SOAK) -v
	SIMBA_REQUIRE_SERVICES=1 $(GO) test -count=10 -timeout 60m -run '$(ZK_FAULTS)' ./backends/zookeeper/
	cd tests && SIMBA_REQUIRE_SERVICES=1 $(GO) test -count=10 -timeout 90m ./zookeeper/
	@echo "== multi-process fault schedules: $(FAULTS_SOAK) per backend, $(FAULTS_SOAK_FAULTS) faults each"
	@out=$$(mktemp); (cd tests && SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 90m ./faults -run 'TestFaults$$' \
		-faults.schedules=$(FAULTS_SOAK) -faults.faults=$(FAULTS_SOAK_FAULTS) -v) >$$out 2>&1; rc=$$?; \
		grep -E -A3 'faults figures|first seed|replay|^(--- |ok|FAIL)' $$out; rm -f $$out; exit $$rc

reliability: ## print the safety figures: simulated schedules, faults by kind, violations within and beyond drift, mutants caught, worst gaps; multi-process fault schedules per backend
	@$(GO) test -count=1 -timeout 30m ./runtime/internal/sim -run 'TestSim$$|TestSimBeyondDrift|TestMutantsCaught' -sim.schedules=$(SIM_CI) -v 2>&1 | \
		grep -E 'sim within drift|sim beyond drift|caught in|mutants caught|^(--- |ok|FAIL)' 
	@echo "== multi-process fault schedules (tests/faults): $(FAULTS_CI) per backend"
	@out=$$(mktemp); (cd tests && SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 20m ./faults -run 'TestFaults$$' \
		-faults.schedules=$(FAULTS_CI) -v) >$$out 2>&1; rc=$$?; \
		grep -E 'faults figures|first seed|replay|^(--- |ok|FAIL)' $$out; rm -f $$out; exit $$rc

# The examples are built once (the first build on a fresh machine compiles
# the backends' drivers too, a minute or so), then each runs about 10s.
# examples/ is a module of its own (it links the etcd backend, which the
# root module must not require). BACKEND picks the store, e.g.
# make demo BACKEND='etcd://127.0.0.1:2379/demo?simba_clock=local&simba_max_lease=3s'
# (backends/etcd/doc.go says how to start an etcd).
BACKEND ?= $(SIMBA_BACKEND)

demo: generate ## regenerate, then the examples on three nodes (in memory, or BACKEND=url): report, billing (8 partitions), ledger (fenced)
	@cd examples && $(GO) build -o ../bin/ ./report ./billing ./ledger
	@echo "== report: a leader-only schedule; the leader stops, the next steps down"
	@SIMBA_BACKEND='$(BACKEND)' bin/report --nodes 3
	@echo; echo "== billing: 8 partitions balanced over the nodes; a fourth joins"
	@SIMBA_BACKEND='$(BACKEND)' bin/billing --nodes 3
	@echo; echo "== ledger: typed steps into a fenced ledger; a frozen leader's late write is refused"
	@SIMBA_BACKEND='$(BACKEND)' bin/ledger --nodes 3

bench: ## run the benchmarks, with the generated wrapper's per-step overhead (testdata module)
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	cd testdata && $(GO) test -run='^$$' -bench=. -benchmem ./...

# The side-by-side comparison (bench/, a module of its own): our backends and
# the peers through one harness, one Markdown table on stdout, also written
# into bench/README.md after a full run. About 15 minutes; COMPARE_FLAGS
# passes flags, e.g. COMPARE_FLAGS='-only Redis' (which leaves the file).
compare: services ## ours and the peers side by side: the table of bench/README.md
	cd bench && $(GO) run ./cmd/compare -readme README.md $(COMPARE_FLAGS)

generate: ## run go generate (simbagen writes each package's simba_gen.go)
	$(GO) generate ./...
	cd examples && $(GO) generate ./...

lint: ## go vet (nested modules too); fail if gofmt would change a file, a cited rule is not in docs/design.md, or a generated file is stale
	$(GO) vet ./...
	@for m in $(NESTED); do (cd $$m && $(GO) vet ./...) || exit 1; done
	cd bench && $(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l lists files (run gofmt -w):"; echo "$$out"; exit 1; fi
	$(GO) run ./scripts/rules
	@big=$$(find . -name '*.go' ! -name '*_test.go' ! -path '*/testdata/*' | xargs wc -l | awk '$$2 != "total" && $$1 > 700'); \
		if [ -n "$$big" ]; then echo "non-test Go files over 700 lines (split them by concept):"; echo "$$big"; exit 1; fi
	$(GO) tool simbagen -check ./...
	cd examples && $(GO) tool simbagen -check ./...

clean: ## remove build and coverage output and the test cache
	rm -rf bin coverage*
	$(GO) clean -testcache
