package analyze

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// sameSummary fails unless the two summaries are identical, requests and
// samples included.
func sameSummary(t *testing.T, tag string, got, want *Summary) {
	t.Helper()
	if !reflect.DeepEqual(got.JSON(true), want.JSON(true)) {
		t.Errorf("%s: JSON differs", tag)
	}
	if !reflect.DeepEqual(got.Reqs, want.Reqs) || !reflect.DeepEqual(got.eventTimes, want.eventTimes) {
		t.Errorf("%s: requests or event times differ", tag)
	}
}

// TestColumnsMatchRows: analyzing through trace's column scanner gives
// exactly what parquet-go's generic row reader gives, over row-group boundaries, shards with offsets,
// warm-up, windows and the histogram switch.
func TestColumnsMatchRows(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 3))
	var paths []string
	for k := range 3 {
		var recs []trace.Record
		for len(recs) < []int{5000, 30, 4096}[k] {
			recs = append(recs, randomRecords(r)...)
		}
		meta := trace.RunMeta{StartWallNs: 1e18 + int64(k)*777_000_001}
		paths = append(paths, writeRecording(t, dir, fmt.Sprintf("s%d.parquet", k), meta, recs))
	}
	for i, o := range []Options{
		{},
		{IncludeWarmup: true, ITL: ITLPerToken, Percentiles: []float64{50, 90, 99}},
		{Window: Window{FromNs: 2e9, ToNs: 9e9}, MaxExactSamples: 2000},
	} {
		for _, ps := range [][]string{paths[:1], paths} {
			tag := fmt.Sprintf("options %d, %d files", i, len(ps))
			got, err := files(ps, o, true)
			if err != nil {
				t.Fatalf("%s: %v", tag, err)
			}
			want, err := files(ps, o, false)
			if err != nil {
				t.Fatalf("%s: %v", tag, err)
			}
			if got.Requests == 0 || got.Completed == 0 {
				t.Fatalf("%s: nothing analyzed", tag)
			}
			sameSummary(t, tag, got, want)
		}
	}
}
