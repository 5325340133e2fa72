package mock

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
)

// vLLM's bucket upper bounds in seconds (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// histogram is a Prometheus histogram of durations: an observation of v ns
// lands in the first bucket whose upper bound (le) is >= v, or in +Inf.
// Observing is lock-free and allocates nothing: a short scan of the bounds
// and two atomic adds.
type histogram struct {
	le      []float64      // upper bounds, seconds, ascending
	boundNs []int64        // le in ns
	counts  []atomic.Int64 // per bucket, not cumulative; the last is +Inf
	sumNs   atomic.Int64
}

func newHistogram(le []float64) *histogram {
	h := &histogram{le: le, boundNs: make([]int64, len(le)), counts: make([]atomic.Int64, len(le)+1)}
	for i, s := range le {
		h.boundNs[i] = int64(s*1e9 + 0.5)
	}
	return h
}

func (h *histogram) observe(ns int64) {
	i := 0
	for i < len(h.boundNs) && ns > h.boundNs[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(ns)
}

// write appends the histogram in Prometheus text format. Buckets are
// cumulative and _count is the +Inf bucket, from one pass over the counts,
// so the lines agree with each other even while requests are observed.
func (h *histogram) write(w io.Writer, name, help, model string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		le := "+Inf"
		if i < len(h.le) {
			le = pyFloat(h.le[i])
		}
		fmt.Fprintf(w, "%s_bucket{le=%q,model_name=%q} %d\n", name, le, model, cum)
	}
	fmt.Fprintf(w, "%s_sum{model_name=%q} %g\n%s_count{model_name=%q} %d\n", name, model, float64(h.sumNs.Load())/1e9, name, model, cum)
}

// pyFloat formats a bound as vLLM's Python client does: "0.001", "1.0".
func pyFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
