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
	got := shellJoin([]string{"test", "-run", "^$", "-bench", "Streams1000$|Streams10000$", "./mock/"})
	if got != `test -run '^$' -bench 'Streams1000$|Streams10000$' ./mock/` {
		t.Errorf("%s", got)
	}
}
