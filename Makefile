# Simba for Go. `make help` lists the targets.

GO ?= go

.PHONY: help services services-down test soak demo bench generate lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

services: ## install (if missing) and start Redis, PostgreSQL and ZooKeeper on loopback
	bash scripts/services.sh up

services-down: ## stop the servers that `make services` started
	bash scripts/services.sh down

# Nested modules (a go.mod of their own, so the root module does not inherit
# their dependencies): make test and make lint run them too, one line each.
NESTED := \
	extra/simbaprometheus \
	extra/simbaotel \
	tests

# SIMBA_REQUIRE_SERVICES=1: a test whose server is missing fails instead of skipping.
test: services lint ## start the servers, vet, check gofmt, run every test with -race (nested modules too)
	SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 15m ./...
	@for m in $(NESTED); do echo "== $$m"; (cd $$m && SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 10m ./...) || exit 1; done

soak: services ## the ZooKeeper fault and ensemble tests, many times over (tens of minutes)
	SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=10 -timeout 60m -run 'Test(Server|Cut|Delayed|Session|Expired|Parent|Shortened)' ./backends/zookeeper/
	cd tests && SIMBA_REQUIRE_SERVICES=1 $(GO) test -race -count=10 -timeout 90m ./zookeeper/

# The examples are built once (the first build on a fresh machine compiles
# the backends' drivers too, a minute or so), then each runs about 10s.
demo: generate ## regenerate, then the examples on three nodes in memory: report, billing (8 partitions), ledger (fenced)
	@$(GO) build -o bin/ ./examples/report ./examples/billing ./examples/ledger
	@echo "== report: a leader-only schedule; the leader stops, the next steps down"
	@bin/report --nodes 3
	@echo; echo "== billing: 8 partitions balanced over the nodes; a fourth joins"
	@bin/billing --nodes 3
	@echo; echo "== ledger: typed steps into a fenced ledger; a frozen leader's late write is refused"
	@bin/ledger --nodes 3

bench: ## run the benchmarks, with the generated wrapper's per-step overhead (testdata module)
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	cd testdata && $(GO) test -run='^$$' -bench=. -benchmem ./...

generate: ## run go generate (simbagen writes each package's simba_gen.go)
	$(GO) generate ./...

lint: ## go vet (nested modules too); fail if gofmt would change a file or a generated file is stale
	$(GO) vet ./...
	@for m in $(NESTED); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l lists files (run gofmt -w):"; echo "$$out"; exit 1; fi
	$(GO) tool simbagen -check ./...

clean: ## remove build and coverage output and the test cache
	rm -rf bin coverage*
	$(GO) clean -testcache
