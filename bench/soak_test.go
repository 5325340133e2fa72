package main

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

func TestSpliceSoakReplacesOnlyItsPart(t *testing.T) {
	doc := "# benchmarks\n\n## a\n\nrows\n"
	one := spliceSoak(doc, "## soak\n\nfirst\n")
	if !strings.HasPrefix(one, doc) || !strings.Contains(one, "first") {
		t.Fatalf("first splice: %q", one)
	}
	two := spliceSoak(one+"\n## after\n", "## soak\n\nsecond\n")
	if strings.Contains(two, "first") || !strings.Contains(two, "second") || !strings.Contains(two, "## after") || !strings.HasPrefix(two, doc) {
		t.Fatalf("second splice: %q", two)
	}
	if k := keptSoak(two); !strings.HasPrefix(k, soakBegin) || !strings.HasSuffix(k, soakEnd) || !strings.Contains(k, "second") {
		t.Fatalf("kept: %q", k)
	}
	if keptSoak(doc) != "" {
		t.Fatal("a file without a soak part kept something")
	}
}

// An error the mock did not inject is a false error; a request the mock saw
// twice or that the recording lacks is counted.
func TestJoinSoak(t *testing.T) {
	log := []mock.LogEntry{{RequestID: "a"}, {RequestID: "b", Fault: "status=503"}, {RequestID: "c"}, {RequestID: "c"}, {RequestID: "d"},
		{RequestID: "mock-probe"}, {RequestID: "x-0-0", Fault: "reset"}, {RequestID: "x-0-1"}}
	recs := []trace.Record{
		{RequestID: "a"},
		{RequestID: "b", ErrorKind: trace.ErrHTTPStatus},
		{RequestID: "c", ErrorKind: trace.ErrConnect, ErrorMessage: "invented"},
		{RequestID: "e", ErrorKind: trace.ErrCanceled},
		{RequestID: "f", Attempt: 1},
		{RequestID: "x-0-1", Attempt: 1},
	}
	j := joinSoak(recs, log)
	if j.faults != 2 || j.falseErrors != 1 || j.duplicates != 1 || j.missing != 1 || j.retried != 2 || len(j.examples) != 2 {
		t.Fatalf("%+v", j)
	}
}

// series makes n samples every soakSample with the value f(i) as RSS MiB.
func series(n int, f func(i int) float64) []sample {
	xs := make([]sample, n)
	for i := range xs {
		xs[i] = sample{At: time.Duration(i+1) * soakSample, RSSBytes: int64(f(i) * (1 << 20))}
	}
	return xs
}

// Flatness is judged after the warm-up by the trend, not by the start:
// RSS that climbs while the process warms up and then holds is flat; a
// steady climb is a leak, whatever the noise around it; noise alone is
// not.
func TestFlatnessJudgesTheTrendAfterWarmUp(t *testing.T) {
	rss := func(s sample) float64 { return float64(s.RSSBytes) / (1 << 20) }
	wiggle := func(i int) float64 { return float64(i%2)*2 - 1 } // -1, +1, ...
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := make([]float64, 60)
	for i := range noise {
		noise[i] = 20 * (rnd.Float64() - 0.5)
	}
	for _, c := range []struct {
		name string
		xs   []sample
		met  bool
	}{
		// A 3-minute soak as measured: 35 -> 47 MiB over the first 100 s,
		// then 48 +- 1.
		{"warm-up climb then flat", series(18, func(i int) float64 {
			if i < 10 {
				return 35 + 1.3*float64(i)
			}
			return 48 + wiggle(i)
		}), true},
		{"steady climb", series(18, func(i int) float64 { return 60 + float64(i) + wiggle(i) }), false},
		{"steady climb over 10 minutes", series(60, func(i int) float64 { return 60 + 0.2*float64(i) + noise[i]/10 }), false},
		{"flat, noisy (goroutines follow in-flight requests)", series(60, func(i int) float64 { return 100 + noise[i] }), true},
		// In flight wanders for minutes: each sample keeps most of the last
		// one's deviation, which a plain least-squares error takes for a
		// trend.
		{"flat, wandering", series(45, func(i int) float64 { return 100 + 10*math.Sin(2*math.Pi*float64(i)/30) }), true},
		{"too few samples", series(2, func(int) float64 { return 60 }), false},
	} {
		value, verdict := flatness(c.xs, rss, "MiB")
		if met := verdict == "met"; met != c.met {
			t.Errorf("%s: %s, %s; want met %v", c.name, value, verdict, c.met)
		}
	}
}
