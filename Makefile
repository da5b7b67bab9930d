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
fuzz:            ## every fuzz target for FUZZTIME each
	$(GO) test ./guest-sdk/abi -run '^$$' -fuzz FuzzDecodeHTTPRequest -fuzztime $(FUZZTIME)
	$(GO) test ./guest-sdk/abi -run '^$$' -fuzz FuzzDecodeHTTPResponse -fuzztime $(FUZZTIME)
	$(GO) test ./kernel -run '^$$' -fuzz FuzzHostCalls -fuzztime $(FUZZTIME)
	$(GO) test ./caps/net -run '^$$' -fuzz FuzzParseOrigin -fuzztime $(FUZZTIME)
	$(GO) test ./caps/net -run '^$$' -fuzz FuzzPathMatch -fuzztime $(FUZZTIME)
	$(GO) test ./caps/net -run '^$$' -fuzz FuzzNarrow -fuzztime $(FUZZTIME)
	$(GO) test ./caps/net -run '^$$' -fuzz FuzzGrant -fuzztime $(FUZZTIME)
	$(GO) test ./caps/net -run '^$$' -fuzz FuzzSubstitute -fuzztime $(FUZZTIME)
	$(GO) test ./sandbox/wazero -run '^$$' -fuzz FuzzParseAndCoalesce -fuzztime $(FUZZTIME)

bench:           ## the benchmarks in BENCHMARKS.md
	$(GO) test ./kernel -run '^$$' -bench CapCall -benchtime 2000000x -count 3
	$(GO) test ./kernel -run '^$$' -bench TaskSpawn -benchtime 300x -count 3
	$(GO) test ./sandbox/wazero -run '^$$' -bench . -benchtime 5x -count 2

check: lint test race  ## everything CI checks
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/mandate
	GOOS=wasip1 GOARCH=wasm $(GO) build ./guest-sdk/...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
