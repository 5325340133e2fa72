package main

import (
	"strings"
	"testing"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkDispatchLag/rate=500/precise-2         	    5000	   2000183 ns/op	        61.44 cores	        12.30 p50-us	        95.10 p99-us
BenchmarkFeed/continuous_usage=false-2          	   10000	     51000 ns/op	 512.00 MB/s	   5040000 events/s	       0 B/op	       0 allocs/op
--- FAIL: BenchmarkBroken
ok  	github.com/tracekit/tracekit/replay	12.3s
`
	rows := parseBench([]byte(out))
	if len(rows) != 2 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r, ok := find(rows, "BenchmarkDispatchLag/rate=500/precise")
	if !ok || r.N != 5000 || r.Metrics["p99-us"] != 95.1 || r.Metrics["cores"] != 61.44 {
		t.Errorf("row %+v", r)
	}
	if r, _ := find(rows, "BenchmarkFeed/continuous_usage=false"); r.Metrics["allocs/op"] != 0 || r.Metrics["events/s"] != 5040000 {
		t.Errorf("row %+v", r)
	}
}

func TestVerdicts(t *testing.T) {
	if v := atMost(90, 100, us); v != "met" {
		t.Errorf("90 <= 100: %s", v)
	}
	if v := atMost(150, 100, us); !strings.Contains(v, "missed") || !strings.Contains(v, "50.0 us") || !strings.Contains(v, "1.5x") {
		t.Errorf("150 vs <= 100: %s", v)
	}
	if v := atLeast(15e6, 20e6, perS); !strings.Contains(v, "5.0M/s") || !strings.Contains(v, "75%") {
		t.Errorf("15M vs >= 20M: %s", v)
	}
}

func TestShellJoinQuotes(t *testing.T) {
	got := shellJoin([]string{"test", "-run", "^$", "-bench", "Streams1000$|Streams10000$", "./internal/mock/"})
	if got != `test -run '^$' -bench 'Streams1000$|Streams10000$' ./internal/mock/` {
		t.Errorf("%s", got)
	}
}

// TestProxyFigures: BenchmarkProxyOverhead's lines become one row per proxy
// and load, without a verdict (the paired row has it).
func TestProxyFigures(t *testing.T) {
	out := `BenchmarkProxyOverhead/streams=1000/via=tracekit-2        	       3	4355975618 ns/op	      3474 added-event-p50-us	    125993 added-event-p99-us	     83708 added-ttft-p50-us	    181745 added-ttft-p99-us	        27.11 direct-event-p50-us	     26700 direct-event-p99-us	     17801 direct-ttft-p50-us	     68277 direct-ttft-p99-us	     14105 over-direct-event-p50-us	    161429 over-direct-event-p99-us	    118643 over-direct-ttft-p50-us	    220622 over-direct-ttft-p99-us	        23.81 proxy-cpu-us/event	     14132 via-event-p50-us	    188129 via-event-p99-us	    136444 via-ttft-p50-us	    288899 via-ttft-p99-us
BenchmarkProxyOverhead/streams=1000/via=nginx-2           	       3	4295059730 ns/op	       402.9 direct-event-p50-us	    131298 direct-event-p99-us	       310.0 direct-ttft-p50-us	    210453 direct-ttft-p99-us	      -204.4 over-direct-event-p50-us	    150 over-direct-event-p99-us	     24327 over-direct-ttft-p50-us	   -124639 over-direct-ttft-p99-us	        15.97 proxy-cpu-us/event	       198.4 via-event-p50-us	     95955 via-event-p99-us	     24637 via-ttft-p50-us	     85814 via-ttft-p99-us
`
	rows := parseBench([]byte(out))
	tk, ok := proxyFigure(rows, "tracekit", 1000, "7.0 6.5 6.0")
	if !ok {
		t.Fatal("no tracekit row")
	}
	for _, want := range []string{"p99 161429 us", "TTFT p50 118643 us, p99 220622 us", "proxy CPU 23.8 us/event", "load average 7.0 6.5 6.0", "own stamps: per event p99 125993 us"} {
		if !strings.Contains(tk.Value, want) {
			t.Errorf("tracekit value %q lacks %q", tk.Value, want)
		}
	}
	if tk.Goal != "" || tk.Verdict != "" {
		t.Errorf("separate rounds judged the goal: %q, %q", tk.Goal, tk.Verdict)
	}
	if !strings.Contains(tk.Note, "judged in the paired row") {
		t.Errorf("tracekit note %q does not say where the goal is judged", tk.Note)
	}
	ng, ok := proxyFigure(rows, "nginx", 1000, "x")
	if !ok || ng.Goal != "" || strings.Contains(ng.Note, "paired row") || !strings.Contains(ng.Value, "per event p50 -204 us, p99 150 us") || !strings.Contains(ng.Value, "proxy CPU 16.0 us/event") {
		t.Errorf("nginx figure %+v", ng)
	}
	if _, ok := proxyFigure(rows, "nginx", 100, "x"); ok {
		t.Error("a row for a load that did not run")
	}
}

// TestAtMostZeroGoal: a goal of zero (the paired proxy row's "below
// nginx") gets a verdict without a ratio to it.
func TestAtMostZeroGoal(t *testing.T) {
	if got := atMost(-3, 0, us); got != "met" {
		t.Fatalf("atMost(-3, 0) = %q, want met", got)
	}
	if got, want := atMost(810.1, 0, us), "**missed** by 810.1 us"; got != want {
		t.Fatalf("atMost(810.1, 0) = %q, want %q", got, want)
	}
	if got, want := atMost(400, 200, us), "**missed** by 200.0 us (2.0x the goal)"; got != want {
		t.Fatalf("atMost(400, 200) = %q, want %q", got, want)
	}
}

// TestPairedFigureGoal: the proxy goal is met per metric by either of its
// halves (added p99 at most 200 us, or below nginx), and a miss says both.
func TestPairedFigureGoal(t *testing.T) {
	m := map[string]float64{"rounds": 40,
		"tracekit-over-direct-event-p99-us": 150, "tracekit-minus-nginx-event-p99-median-us": 30,
		"tracekit-over-direct-ttft-p99-us": 3075, "tracekit-minus-nginx-ttft-p99-median-us": -364.1}
	f := pairedFigure(m, "x")
	if want := "ITL met (added 150.0 us); TTFT met (364.1 us below nginx)"; f.Verdict != want {
		t.Errorf("verdict %q, want %q", f.Verdict, want)
	}
	m["tracekit-over-direct-event-p99-us"] = 900
	f = pairedFigure(m, "x")
	if want := "ITL **missed**: added 900.0 us (4.5x the 200 us goal), 30.0 us above nginx; TTFT met"; !strings.HasPrefix(f.Verdict, want) {
		t.Errorf("verdict %q, want it to start %q", f.Verdict, want)
	}
	if !strings.Contains(f.Value, "ITL +30 us, TTFT -364 us") {
		t.Errorf("value %q", f.Value)
	}
}
