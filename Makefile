# The one test command (README, .ci/run): installs what the tests need, then
# checks formatting, vets, runs every test and a short fuzz of each parser of
# untrusted input. Under CI=true nothing the tests need is ever skipped.
GO ?= go
# A count of executions, not a duration: Go 1.26's fuzzing coordinator can
# fail a duration-bounded run with a bare "context deadline exceeded" when
# a worker is mid-input as the time runs out (golang/go#75804, fixed in Go
# 1.27), with no crasher and nothing to reproduce. A count has no deadline.
FUZZTIME ?= 40000x

.PHONY: test deps fmt vet unit unit-postgres fuzz fuzz-wire bench bench-go build demo faults-long

test: deps fmt vet unit unit-postgres fuzz

# Each stage says when it starts: the long ones (the first vet compiles the
# PostgreSQL parser through cgo, the unit tests run for minutes) print
# nothing else until they end.
say = @echo "make test: [$$(date +%H:%M:%S)] $(1)"

deps:
	$(call say,deps: installing what the tests need that is missing (quiet when all is there))
	@bash scripts/ensure-tools.sh

fmt:
	$(call say,fmt: gofmt)
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(call say,vet: go vet (the first run compiles the PostgreSQL parser through cgo: about 6 minutes of silence on 2 cores))
	$(GO) vet ./...

unit:
	$(call say,unit: every package's tests (about 8 to 10 minutes on 2 cores; each package prints its line when it ends))
	$(GO) test -count=1 -timeout 30m ./...

# The control store's users again, on a PostgreSQL store (a throwaway
# server per package): the tests written for one store pick the driver from
# HM_TEST_STORE. Tests that need both drivers run both in the pass above.
STORE_USERS = ./internal/logbook/ ./internal/gateway/ ./internal/audit/ ./internal/switches/
unit-postgres:
	$(call say,unit-postgres: the store's users again on a PostgreSQL store)
	HM_TEST_STORE=postgres $(GO) test -count=1 -timeout 30m $(STORE_USERS)

# Short fuzz runs; crashers land in testdata/fuzz and become regression cases.
fuzz:
	$(call say,fuzz: a short run of each parser's fuzz target (each builds its instrumented test binary first))
	$(GO) test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(FUZZTIME) ./internal/sqlcheck/
	$(GO) test -run '^$$' -fuzz '^FuzzShape$$' -fuzztime $(FUZZTIME) ./internal/sqlcheck/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/bound/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./internal/marque/
	$(GO) test -run '^$$' -fuzz '^FuzzLookalike$$' -fuzztime $(FUZZTIME) ./internal/lookalike/

# The wire front's fuzz target, not in test: its instrumented build takes in
# the whole control plane and the model SDKs (over ten minutes with a cold
# build cache on 2 cores). Its seeds run as unit tests in every test run.
fuzz-wire:
	$(GO) test -run '^$$' -fuzz '^FuzzSession$$' -fuzztime $(FUZZTIME) ./internal/pgwire/
	$(GO) test -run '^$$' -fuzz '^FuzzSpliceIsTheInlinedText$$' -fuzztime $(FUZZTIME) ./internal/pgwire/

# The long fault-injection suite (docs/faults.md); not part of test.
# FAULTS_SEED=N replays a run's random choices.
FAULTS_SEED ?= 0
faults-long:
	$(GO) test -count=1 -timeout 60m -v ./internal/faults/ -faults.long -faults.seed $(FAULTS_SEED)

# pgbench against the demo's target: direct, through PgBouncer and through
# the wire front, then harbormaster bench (scripts/pgbench.sh; not part of test).
bench: build
	./scripts/pgbench.sh

# The Go benchmarks of the check, the logbook and the statement path.
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/sqlcheck/ ./internal/logbook/ ./internal/gateway/

# One build, to bin/, which demo then runs. -buildvcs=auto records the
# commit for harbormaster version even where GOFLAGS turns stamping off.
build:
	@echo "make: building bin/harbormaster. The first build compiles the PostgreSQL parser (pg_query_go, C through cgo):"
	@echo "make: about 6 minutes with no output after the downloads. Later builds take seconds."
	$(GO) build -buildvcs=auto -o bin/harbormaster ./cmd/harbormaster

# make demo DEMO_FLAGS="--dir /tmp/hm-demo" keeps its files across starts.
DEMO_FLAGS ?=
demo: build
	./bin/harbormaster demo $(DEMO_FLAGS)
