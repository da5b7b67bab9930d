# Developer shortcuts. CI runs .ci/run, which runs `make check` equivalents.
GO ?= go

.PHONY: test test-wasmtime race lint staticcheck fmt fuzz fuzz-ci bench bench-lifecycle bench-extism check demo

demo:            ## the main demo
	$(GO) run ./examples/quickstart

test:            ## the test suite (the README's test command)
	$(GO) test -timeout 30m ./... ./guest-sdk/...

test-wasmtime:   ## the same suite with guests on wasmtime (cgo)
	$(GO) test -timeout 30m -tags wasmtime ./... ./guest-sdk/...

race:            ## race detector on the concurrent core and the stores
	$(GO) test -race ./kernel/ ./sandbox/... ./caps/... ./runstore/ ./audit/ ./internal/sqlitedb/
	$(GO) test -race -run 'TestConcurrent' ./internal/cli/
	$(GO) test -race -tags wasmtime ./sandbox/wasmtime/

# staticcheck at the version .ci/run pins, installed once into a temporary
# folder (a binary for this machine: the wasip1 run sets GOOS for the
# packages, not for the tool).
STATICCHECK_DIR ?= $(or $(TMPDIR),/tmp)/mandate-staticcheck

lint:            ## go vet, gofmt and staticcheck, as .ci/run runs them
	$(GO) vet ./... ./guest-sdk/...
	$(GO) vet -tags wasmtime ./... ./guest-sdk/...
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(MAKE) staticcheck

staticcheck:     ## staticcheck on both modules (not the vendored internal/graphviz), both builds, the SDK for wasip1
	GOBIN=$(STATICCHECK_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	$(STATICCHECK_DIR)/staticcheck $$($(GO) list ./... | grep -v '/internal/graphviz') ./guest-sdk/...
	$(STATICCHECK_DIR)/staticcheck -tags wasmtime $$($(GO) list -tags wasmtime ./... | grep -v '/internal/graphviz') ./guest-sdk/...
	GOOS=wasip1 GOARCH=wasm $(STATICCHECK_DIR)/staticcheck ./guest-sdk/...

fmt:
	gofmt -w .

fuzz-ci:
	FUZZTIME=2s GO=$(GO) ./.ci/fuzz

FUZZTIME ?= 30s
fuzz:            ## every fuzz target (found by .ci/fuzz) for FUZZTIME each
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./.ci/fuzz

bench:           ## the benchmarks in BENCHMARKS.md
	$(GO) test ./kernel -run '^$$' -bench CapCall -benchtime 2000000x -count 3
	$(GO) test ./kernel -run '^$$' -bench TaskSpawn -benchtime 300x -count 3
	$(GO) test ./sandbox/wazero -run '^$$' -bench . -benchtime 5x -count 2
	$(GO) test -tags wasmtime ./sandbox/wasmtime -run '^$$' -bench . -benchtime 5x -count 2
	$(GO) test ./kernel -run '^$$' -bench Runaway -benchtime 3x
	$(GO) test -tags wasmtime ./kernel -run '^$$' -bench Runaway -benchtime 3x
	$(MAKE) bench-lifecycle

bench-lifecycle: ## the task lifecycle (BENCHMARKS.md, "Task lifecycle"), both engines
	$(GO) test -tags wasmtime ./kernel -run '^$$' -bench CapCall -benchtime 500000x -count 3
	$(GO) test -tags wasmtime ./sandbox/wasmtime -run '^$$' -bench HostCall -benchtime 1000000x -count 3
	$(GO) test ./internal/lifecycle -run '^$$' -bench Lifecycle -benchtime 1000x -count 3
	$(GO) test -tags wasmtime ./internal/lifecycle -run '^$$' -bench 'Lifecycle/wasmtime' -benchtime 1000x -count 3
	$(GO) test ./internal/lifecycle -run '^$$' -bench IdleRSS -benchtime 1x -count 3
	$(GO) test -tags wasmtime ./internal/lifecycle -run '^$$' -bench 'IdleRSS/wasmtime' -benchtime 1x -count 3

bench-extism:    ## Mandate's task lifecycle against Extism's Go SDK, interleaved (minutes)
	./bench/extism/run.sh

check: lint test test-wasmtime race fuzz-ci  ## everything CI checks
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/mandate
	GOOS=wasip1 GOARCH=wasm $(GO) build ./guest-sdk/...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
