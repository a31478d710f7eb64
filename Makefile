# ardx: every target is a line or two; see README.md.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO      ?= go
BENCH   ?= .

.PHONY: build run test race e2e bench bench-search-load bench-side-by-side lint testdata bench-tasks

build: ## the binary, ./ardx
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o ardx .

run: build ## both services on loopback with the embedded defaults (dev chain, default corpus); ARGS adds flags
	./ardx serve $(ARGS)

test: ## every hermetic test: in-process servers and the simulated chain; lists skipped tests and why
	$(GO) run ./internal/testsummary -count=1 -timeout 20m ./...

race: ## the hermetic tests under the race detector, -short (the relevance evaluations and the longest property run are make test's)
	$(GO) test -race -short -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/e2e$$')

e2e: build ## the end-to-end tier: the built binary, a real chain node, real clients
	ARDX_BIN=$(CURDIR)/ardx $(GO) test -tags e2e -count=1 -timeout 20m -v ./e2e/...

bench: ## benchmarks, reported as numbers (never timed assertions); ends with bench-search-load
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -timeout 60m ./...
	$(MAKE) bench-search-load

bench-search-load: build ## search through the built binary from a separate load generator: 100k entries, unique natural-language queries, 1 and 8 clients
	$(GO) run ./internal/loadgen -bin $(CURDIR)/ardx

bench-side-by-side: build ## ardx and the official TypeScript facilitator on one geth --dev: verify and settle throughput
	ARDX_BIN=$(CURDIR)/ardx ARDX_E2E_SIDE_BY_SIDE=1 $(GO) test -tags e2e -count=1 -timeout 20m -v -run TestSideBySideThroughput ./e2e/...

lint: ## go vet and gofmt
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

testdata: ## regenerate the test token (npm solc) and golden files
	bash testdata/contracts/build.sh
	$(GO) test -count=1 $$(grep -rl --include='*_test.go' 'flag.Bool("update"' . | xargs -n1 dirname | sort -u) -update

bench-tasks: ## regenerate the frozen benchmark task set from the default corpus, on purpose only (raise -version in registry/bench/bench.go)
	$(GO) generate ./registry/bench
