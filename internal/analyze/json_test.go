package analyze

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

func jsonOf(t *testing.T, s *Summary, detailed bool) map[string]any {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteJSON(&b, detailed); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func floats(t *testing.T, v any) []float64 {
	t.Helper()
	xs, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x.(float64)
	}
	return out
}

func closeAll(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", name, got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

// vLLM's per-request lists: latencies, queue_times and rtfx always; with
// detail input_lens (the client's count unless usage reported), output_lens,
// start_times, ttfts and itls (a failed HTTP 200 request keeps what it
// streamed), errors (the message).
func TestJSONLists(t *testing.T) {
	recs := handRecords()[1:] // r1 r2 r3 r4 r6, no warm-up
	// r3 timed out after two events.
	recs[2].EventNs, recs[2].EventTokens = []int64{3000 * ms, 3040 * ms}, []int32{1, 1}
	recs[2].ErrorMessage = "idle for 1m0s"
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, recs)
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain := jsonOf(t, s, false)
	closeAll(t, "latencies", floats(t, plain["latencies"]), []float64{0.3, 0.5, 0, 0, 1.1})
	closeAll(t, "queue_times", floats(t, plain["queue_times"]), []float64{0.1, 0, 0, 0, 0})
	if plain["rtfx"] != 0.0 {
		t.Errorf("rtfx %v", plain["rtfx"])
	}
	for _, k := range []string{"ttfts", "itls", "input_lens", "output_lens", "start_times", "errors"} {
		if _, ok := plain[k]; ok {
			t.Errorf("%s present without detail (vLLM drops it)", k)
		}
	}
	d := jsonOf(t, s, true)
	closeAll(t, "ttfts", floats(t, d["ttfts"]), []float64{0.1, 0.5, 0.1, 0, 0.1})
	closeAll(t, "input_lens", floats(t, d["input_lens"]), []float64{100, 50, 70, 30, 200})
	closeAll(t, "output_lens", floats(t, d["output_lens"]), []float64{5, 1, 0, 0, 4})
	closeAll(t, "start_times", floats(t, d["start_times"]), []float64{1, 2, 2.9, 3, 1.5})
	itls := d["itls"].([]any)
	closeAll(t, "itls[2] (failed, partial)", floats(t, itls[2]), []float64{0.04})
	closeAll(t, "itls[3] (HTTP 500)", floats(t, itls[3]), []float64{})
	closeAll(t, "itls[4]", floats(t, itls[4]), []float64{0.1, 0.9})
	if errs := d["errors"].([]any); !reflect.DeepEqual(errs, []any{"", "", "idle for 1m0s", "http_status", ""}) {
		t.Errorf("errors %q", errs)
	}
}
