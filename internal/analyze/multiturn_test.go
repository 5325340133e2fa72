package analyze

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The multi-turn table takes vLLM multi-turn's client's inputs: TTFT at
// the first content chunk (adjusted when it carried several tokens), TPOT
// keeping one-token answers as 0, the client's token counts, content
// chunks - 1, latency to the end of the body, runtime to the end of the
// last-started request.
func TestMultiTurnScriptInputs(t *testing.T) {
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mt := s.MultiTurn
	want := map[string][]float64{ // count, mean, min, max
		"ttft_ms":           {3, (150 + 500 + 0.1) / 3, 0.1, 500},
		"tpot_ms":           {3, (40 + 0 + 500) / 3.0, 0, 500},
		"latency_ms":        {3, (310 + 510 + 1200) / 3.0, 310, 1200},
		"input_num_turns":   {3, (1 + 3 + 3) / 3.0, 1, 3},
		"input_num_tokens":  {3, (90 + 50 + 180) / 3.0, 50, 180},
		"output_num_tokens": {3, (5 + 1 + 4) / 3.0, 1, 5},
		"output_num_chunks": {3, (2 + 0 + 1) / 3.0, 0, 2},
	}
	for _, r := range mt.Rows {
		w := want[r.Name]
		if w == nil || float64(r.Count) != w[0] {
			t.Errorf("%s: count %d, want %v", r.Name, r.Count, w)
			continue
		}
		near(t, r.Name+" mean", r.Mean, w[1])
		near(t, r.Name+" min", r.Min, w[2])
		near(t, r.Name+" max", r.Max, w[3])
	}
	// Starts 1.0, 1.5, 2.0 s; the last-started (r2) ends 510 ms later.
	near(t, "runtime", mt.RuntimeSec, 1.51)
	near(t, "requests per sec", mt.RequestsPerSec, 3/1.51)
	if len(mt.Columns) != 4 {
		t.Errorf("columns %v", mt.Columns)
	}
}

// Its 99, 99.9 and 99.99 columns appear from 100, 1,000 and 10,000
// requests.
func TestMultiTurnPercentileColumns(t *testing.T) {
	for _, c := range []struct {
		n    int
		cols string
	}{{99, "25% 50% 75% 90%"}, {100, "25% 50% 75% 90% 99%"}, {1000, "25% 50% 75% 90% 99% 99.9%"}, {10000, "25% 50% 75% 90% 99% 99.9% 99.99%"}} {
		recs := make([]trace.Record, c.n)
		for i := range recs {
			sent := int64(i) * ms
			recs[i] = rec(fmt.Sprint(i), 0, sent/ms, sent/ms, sent/ms, sent/ms+30, 200, "", 10, 10, 2, -1, [2]int64{sent/ms + 10, 1}, [2]int64{sent/ms + 20, 1})
		}
		s := Records(recs, trace.RunMeta{}, Options{})
		if got := strings.Join(s.MultiTurn.Columns, " "); got != c.cols {
			t.Errorf("%d requests: columns %q, want %q", c.n, got, c.cols)
		}
		if c.n == 10000 {
			var b bytes.Buffer
			s.WriteText(&b)
			if !strings.Contains(b.String(), "99.99%") {
				t.Error("the text lacks the 99.99% column")
			}
		}
	}
}
