# Developer shortcuts. CI runs .ci/run, which runs `make check` equivalents.
GO ?= go

.PHONY: test race lint fmt fuzz bench check demo

demo:            ## the main demo
	$(GO) run ./examples/quickstart

test:            ## the test suite (the README's test command)
	$(GO) test ./...

race:            ## race detector on the concurrent core
	$(GO) test -race ./kernel/ ./sandbox/... ./caps/...

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)

fmt:
	gofmt -w .

FUZZTIME ?= 30s
fuzz:            ## every fuzz target (found by .ci/fuzz) for FUZZTIME each
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./.ci/fuzz

bench:           ## the benchmarks in BENCHMARKS.md
	$(GO) test ./kernel -run '^$$' -bench CapCall -benchtime 2000000x -count 3
	$(GO) test ./kernel -run '^$$' -bench TaskSpawn -benchtime 300x -count 3
	$(GO) test ./sandbox/wazero -run '^$$' -bench . -benchtime 5x -count 2

check: lint test race  ## everything CI checks
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/mandate
	GOOS=wasip1 GOARCH=wasm $(GO) build ./guest-sdk/...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
