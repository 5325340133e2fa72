# tracekit: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin/tracekit
DEMO    := $(CURDIR)/.demo
PKGS    := ./...

.PHONY: build test demo bench clean

build:
	$(GO) build -o $(BIN) ./cmd/tracekit

# go vet, then every package under the race detector.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

demo: build
	@mkdir -p $(DEMO)
	$(BIN) synth --conversations 20 --turns 3-5 --seed 1 -o $(DEMO)/trace.parquet
	$(BIN) inspect $(DEMO)/trace.parquet

bench: build
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin $(DEMO)
