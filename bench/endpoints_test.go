package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/calibrate"
)

// The decoder rows: per API its allocations against 0, and Responses' and
// Messages' token events/s against chat's, the ratio computed; the figures
// render and read back.
func TestDecoderFigures(t *testing.T) {
	out := `BenchmarkDecoders/chat-2         	    2113	    117488 ns/op	 479.68 MB/s	   2204488 events/s	   2000000 outputs/s	       0 B/op	       0 allocs/op
BenchmarkDecoders/responses-2    	    2484	    160678 ns/op	 353.27 MB/s	   1643042 events/s	   1600000 outputs/s	       0 B/op	       0 allocs/op
BenchmarkDecoders/messages-2     	    3714	    143301 ns/op	 222.85 MB/s	   1828321 events/s	   1000000 outputs/s	      48 B/op	       1 allocs/op
BenchmarkDecoders/responses-2    	    2484	    160678 ns/op	 353.27 MB/s	   1643042 events/s	    800000 outputs/s	       0 B/op	       0 allocs/op
`
	figs := decoderFigures("Hot paths", parseBench([]byte(out)), "go test -bench Decoders ./internal/record/")
	if len(figs) != 5 { // the slower responses run is not a figure of its own
		t.Fatalf("%d figures, want 3 decoders and 2 ratios: %+v", len(figs), figs)
	}
	byName := map[string]figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	for name, want := range map[string]string{
		"chat stream decoding":              "met",
		"responses stream decoding":         "met",
		"messages stream decoding":          "**missed** by 1",
		"responses decoding against chat's": "met",
		"messages decoding against chat's":  "**missed** by 0.50x",
	} {
		f, ok := byName[name]
		if !ok || !strings.HasPrefix(f.Verdict, want) {
			t.Errorf("%s: %+v, want verdict %q", name, f, want)
		}
	}
	// With -count, each API's fastest run.
	if v := byName["responses decoding against chat's"].Value; !strings.HasPrefix(v, "1.25x chat's time") {
		t.Errorf("responses ratio: %q", v)
	}
	roundTrip(t, figs)
}

// One figure per endpoint's stream step, its verdict the step's pass.
func TestEndpointFigures(t *testing.T) {
	rep := &calibrate.Report{OffsetsNs: map[string]int64{"chat": 50_000, "embeddings": 400_000}, Steps: []calibrate.Result{
		{Step: calibrate.Step{Kind: calibrate.KindProbe, Endpoint: "chat"}, Endpoint: "chat", Join: calibrate.JoinEvents, Pass: true},
		{Step: calibrate.Step{Kind: calibrate.KindStreams, Streams: 200, Endpoint: "chat"}, Endpoint: "chat", Join: calibrate.JoinEvents,
			Matched: 4000, EventsClient: 4000, ErrP99Ns: 300_000, Pass: true},
		{Step: calibrate.Step{Kind: calibrate.KindStreams, Streams: 200, Endpoint: "embeddings"}, Endpoint: "embeddings", Join: calibrate.JoinBody,
			Matched: 200, EventsClient: 200, ErrP99Ns: 3_000_000, Why: "p99 error 3.00ms > 1.00ms"},
	}}
	figs := endpointFigures(rep, "bin/tracekit calibrate --endpoint chat,embeddings")
	if len(figs) != 2 || figs[0].Verdict != "met" || figs[1].Verdict != "**missed**: p99 error 3.00ms > 1.00ms" ||
		!strings.Contains(figs[0].Value, "p99 0.300 ms") || !strings.Contains(figs[0].Value, "offset 50.0 us") ||
		!strings.Contains(figs[1].Name, "embeddings at 200 streams (one body") {
		t.Fatalf("figures %+v", figs)
	}
	roundTrip(t, figs)
}

// roundTrip renders figs as BENCHMARKS.md and reads them back unchanged.
func roundTrip(t *testing.T, figs []figure) {
	t.Helper()
	doc := render([]string{"CPU: test"}, figs, nil, time.Minute)
	p, err := parseBenchmarksMD(doc)
	if err != nil {
		t.Fatal(err)
	}
	if again := render(p.mach, p.figs, p.failures, p.total); again != doc {
		t.Fatalf("round trip: %s", firstDiff(doc, again))
	}
}
