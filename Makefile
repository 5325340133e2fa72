# tracekit: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin/tracekit
DEMO    := .demo
PKGS    := ./...
# 0: the demo's mock takes a free port and names it in its --ready-file.
DEMO_PORT ?= 0

.PHONY: build test demo screenshot bench soak notebook-check sdk-check render-check darwin-check clean

build:
	$(GO) build -o $(BIN) ./cmd/tracekit

# go vet, then every package under the race detector.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The main job on the embedded default: synthesize a small multi-turn
# trace, start the mock server, replay the trace against it, analyze the
# recording, stop the mock. The replay goes to the address the mock itself
# reports once serving (its ready file), so it never measures another
# server that holds the port; a mock that cannot start ends the demo.
demo: build
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN) synth --conversations 40 --turns 3-6 --input-tokens 100-300 --output-tokens 50-150 \
		--rate 8 --think-time exponential:mean=500ms --seed 1 -o $(DEMO)/trace.parquet
	$(BIN) inspect $(DEMO)/trace.parquet
	@set -e; ready=$(DEMO)/mock.ready.json; \
	$(BIN) mock --listen 127.0.0.1:$(DEMO_PORT) --seed 1 --emit-log $(DEMO)/mock-log.parquet --ready-file $$ready & mock=$$!; \
	trap 'kill -INT $$mock 2>/dev/null; wait $$mock 2>/dev/null || true' EXIT; \
	i=0; while [ ! -s $$ready ]; do \
		kill -0 $$mock 2>/dev/null || { echo "demo: the mock did not start (see its error above)" >&2; exit 1; }; \
		i=$$((i + 1)); [ $$i -le 300 ] || { echo "demo: the mock was not serving within 30 s" >&2; exit 1; }; \
		sleep 0.1; \
	done; \
	url=$$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' $$ready); \
	$(BIN) replay $(DEMO)/trace.parquet --target $$url --ready-timeout 10s \
		--no-analyze -o $(DEMO)/recording.parquet; \
	$(BIN) analyze $(DEMO)/recording.parquet --html $(DEMO)/report.html --json $(DEMO)/result.json
	@echo "demo files in $(DEMO): trace.parquet recording.parquet mock-log.parquet report.html result.json"

# The README's picture of the HTML report: make demo, then a PNG of its
# report.html from headless Chromium (apt-get install chromium).
CHROMIUM ?= chromium
SCREENSHOT := docs/images/report.png
screenshot: demo
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run --user-data-dir=$$d \
		--screenshot=$(CURDIR)/$(SCREENSHOT) --window-size=1280,2000 \
		file://$(abspath $(DEMO))/report.html >$$d/log 2>&1 || { cat $$d/log; exit 1; }
	@echo "wrote $(SCREENSHOT)"

# Every performance figure, with its goal, into BENCHMARKS.md (about 15 min on
# 2 cores; run it on a quiet machine). The only writer of BENCHMARKS.md.
bench: build
	$(GO) run ./bench -o BENCHMARKS.md -bin $(BIN)

# Opt-in, not part of make test or make bench: 10 minutes of multi-turn replay
# against the mock with 1% faults and a 5 s idle close; RSS, goroutines and
# descriptors must stay flat and no error may be invented. Rewrites only the
# soak part of BENCHMARKS.md.
SOAK ?= 10m
soak: build
	$(GO) run ./bench -soak $(SOAK) -o BENCHMARKS.md -bin $(BIN)

# Opt-in: every HTML page (reports, run sets, the live page) rendered in
# headless Chromium, failing on a JavaScript error or a chart without its
# curves. Installs Debian's chromium when it is missing (needs root).
render-check:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	TRACEKIT_CHROMIUM=$$(command -v chromium) $(GO) test -count=1 -run 'Chromium' -v ./internal/analyze ./internal/live ./cmd/tracekit

# Opt-in: open the files in DuckDB (its Node.js bindings, from the npm
# registry, into a throw-away folder) and check the queries of docs/formats.md.
notebook-check:
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	npm install --silent --prefix $$d @duckdb/node-api@1.5.6-r.1 && \
	TRACEKIT_DUCKDB_NODE=$$d $(GO) test -count=1 -run DuckDB -v ./cmd/tracekit

# The official OpenAI and Anthropic SDKs (Node.js, installed from npm into a
# throw-away folder) against tracekit mock: Responses, embeddings, chat and
# Messages answers each SDK must accept, checked against the mock's log;
# then the same calls through tracekit capture, and the captured trace replayed.
# openai 6.x: the 7.x line needs Node.js 22.
sdk-check:
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	npm install --silent --prefix $$d openai@6.49.0 @anthropic-ai/sdk@1.17.0 && \
	TRACEKIT_SDK_NODE=$$d $(GO) test -count=1 -run SDK -v ./cmd/tracekit

# Opt-in: the code and its tests compile and vet for macOS (the files behind
# build tags); not in make test, as it compiles every package a second time.
darwin-check:
	GOOS=darwin $(GO) vet $(PKGS)

clean:
	rm -rf bin $(DEMO)
