package telemetry

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCounterResets(t *testing.T) {
	// 10 -> 15 (+5) -> 3 (reset: +3) -> 8 (+5) -> 8 (+0): 13 over 4 s.
	p := []Point{{1e9, 10}, {2e9, 15}, {3e9, 3}, {4e9, 8}, {5e9, 8}}
	c := Counter(p, All)
	if !c.OK || c.Increase != 13 || c.Resets != 1 || c.FromNs != 1e9 || c.ToNs != 5e9 || !near(c.PerSecond, 13.0/4) {
		t.Errorf("Counter over all = %+v", c)
	}
	// [2.5 s, 4.5 s]: from the last sample at or before 2.5 s (15 at 2 s)
	// to the last at or before 4.5 s (8 at 4 s): +3 +5.
	c = Counter(p, Window{2.5e9, 4.5e9})
	if !c.OK || c.Increase != 8 || c.Resets != 1 || c.FromNs != 2e9 || c.ToNs != 4e9 || c.FirstIsPartial {
		t.Errorf("Counter over [2.5s,4.5s] = %+v", c)
	}
	// Before the first sample: measured from the first, and said so.
	c = Counter(p, Window{0, 2e9})
	if !c.OK || c.Increase != 5 || !c.FirstIsPartial {
		t.Errorf("Counter over [0,2s] = %+v", c)
	}
	if c := Counter(p, Window{5e9, 9e9}); c.OK {
		t.Errorf("a window holding one sample gave %+v", c)
	}
	// Two engines' counters add.
	a := &Series{Points: p}
	b := &Series{Points: []Point{{1e9, 100}, {5e9, 107}}}
	if s := SumCounters([]*Series{a, b}, All); s.Increase != 20 || s.Series != 2 {
		t.Errorf("SumCounters = %+v", s)
	}
}

func TestGauge(t *testing.T) {
	p := []Point{{1e9, 4}, {2e9, 8}, {3e9, 0}, {4e9, 6}}
	g := Gauge(p, Window{1.5e9, 3.5e9})
	if !g.OK || g.N != 2 || g.Min != 0 || g.Max != 8 || g.Mean != 4 || g.Last != 0 || g.LastNs != 3e9 {
		t.Errorf("Gauge = %+v", g)
	}
	if g := Gauge(p, All); g.N != 4 || g.Mean != 4.5 || g.Last != 6 {
		t.Errorf("Gauge over all = %+v", g)
	}
	x := &Series{Points: []Point{{1e9, 1}, {2e9, 3}}}
	y := &Series{Points: []Point{{1e9, 0.5}, {2e9, 0.25}}}
	if c := Combine([]*Series{x, y}, AggSum); len(c) != 2 || c[0].Value != 1.5 || c[1].Value != 3.25 {
		t.Errorf("Combine sum = %v", c)
	}
	if c := Combine([]*Series{x, y}, AggMean); c[1].Value != 1.625 {
		t.Errorf("Combine mean = %v", c)
	}
}

func TestHistogramQuantileByHand(t *testing.T) {
	// 50 observations: 10 <= 0.1, 20 in (0.1, 0.5], 15 in (0.5, 1], 5 above 1.
	b := []Bucket{{math.Inf(1), 50}, {0.5, 30}, {0.1, 10}, {1, 45}} // any order
	for _, c := range []struct {
		q, value, lower, upper float64
	}{
		// rank 25 falls in (0.1, 0.5]: 0.1 + 0.4 * (25-10)/(30-10) = 0.4
		{0.5, 0.4, 0.1, 0.5},
		// rank 2.5 in the first bucket, lower bound 0: 0.1 * 2.5/10 = 0.025
		{0.05, 0.025, 0, 0.1},
		// rank 40.5 in (0.5, 1]: 0.5 + 0.5 * (40.5-30)/15 = 0.85
		{0.81, 0.85, 0.5, 1},
		// rank 49.5 is in the +Inf bucket: the largest finite bound
		{0.99, 1, 1, math.Inf(1)},
	} {
		got := HistogramQuantile(c.q, b)
		if !near(got.Value, c.value) || got.Lower != c.lower || got.Upper != c.upper {
			t.Errorf("q=%v: %+v, want value %v in [%v, %v]", c.q, got, c.value, c.lower, c.upper)
		}
	}
	if w := HistogramQuantile(0.5, b).Width(); !near(w, 0.4) {
		t.Errorf("width %v", w)
	}
	if q := HistogramQuantile(0.5, []Bucket{{1, 0}, {math.Inf(1), 0}}); !math.IsNaN(q.Value) {
		t.Errorf("no observations gave %v", q.Value)
	}
	if q := HistogramQuantile(0.5, []Bucket{{1, 3}}); !math.IsNaN(q.Value) {
		t.Errorf("no +Inf bucket gave %v", q.Value)
	}
	if q := HistogramQuantile(1.5, b); !math.IsInf(q.Value, 1) {
		t.Errorf("q>1 gave %v", q.Value)
	}
}

// histRows writes one scrape of histogram "h" (bounds 0.1, 0.5, 1, +Inf)
// with the given cumulative counts and sum, for one engine label.
func histRows(at int64, engine string, counts [4]float64, sum float64) []trace.MetricSample {
	var rows []trace.MetricSample
	eng := trace.Label{Name: "engine", Value: engine}
	for i, le := range []string{"0.1", "0.5", "1", "+Inf"} {
		rows = append(rows, trace.MetricSample{TimeNs: at, Target: "t", Name: "h_bucket", Family: "h", Type: trace.MetricHistogram,
			Labels: []trace.Label{eng, {Name: "le", Value: le}}, Value: counts[i]})
	}
	rows = append(rows,
		trace.MetricSample{TimeNs: at, Target: "t", Name: "h_sum", Family: "h", Type: trace.MetricHistogram, Labels: []trace.Label{eng}, Value: sum},
		trace.MetricSample{TimeNs: at, Target: "t", Name: "h_count", Family: "h", Type: trace.MetricHistogram, Labels: []trace.Label{eng}, Value: counts[3]})
	return rows
}

func TestHistogramWindow(t *testing.T) {
	var rows []trace.MetricSample
	// Engine 0: before the window 5 observations; by its end 55 (the 50 of
	// the hand example above arrived during it).
	rows = append(rows, histRows(1e9, "0", [4]float64{2, 3, 4, 5}, 2)...)
	rows = append(rows, histRows(2e9, "0", [4]float64{7, 18, 30, 33}, 12)...)
	rows = append(rows, histRows(3e9, "0", [4]float64{12, 33, 49, 55}, 27)...)
	// After the window: must not count.
	rows = append(rows, histRows(4e9, "0", [4]float64{100, 100, 100, 100}, 99)...)
	d := NewData(trace.MetricsMeta{}, rows)
	h := d.Histogram("t", "h", Window{1e9, 3.5e9})
	want := []Bucket{{0.1, 10}, {0.5, 30}, {1, 45}, {math.Inf(1), 50}}
	if !h.OK || h.Count != 50 || h.Sum != 25 || h.Mean != 0.5 || h.FromNs != 1e9 || h.ToNs != 3e9 || len(h.Buckets) != 4 {
		t.Fatalf("Histogram = %+v", h)
	}
	for i := range want {
		if h.Buckets[i] != want[i] {
			t.Errorf("bucket %d = %+v, want %+v", i, h.Buckets[i], want[i])
		}
	}
	if !near(h.P50.Value, 0.4) || h.P99.Upper != math.Inf(1) {
		t.Errorf("P50 %+v P99 %+v", h.P50, h.P99)
	}

	// A server restart between scrapes: counts fall, and what the new
	// process counted since is the increase.
	var rr []trace.MetricSample
	rr = append(rr, histRows(1e9, "0", [4]float64{2, 3, 4, 5}, 2)...)
	rr = append(rr, histRows(2e9, "0", [4]float64{4, 6, 8, 10}, 4)...)      // +2 +3 +4 +5
	rr = append(rr, histRows(3e9, "0", [4]float64{1, 1, 2, 3}, 1)...)       // reset: +1 +1 +2 +3
	rr = append(rr, histRows(4e9, "0", [4]float64{2, 3, 4, 6}, 2)...)       // +1 +2 +2 +3
	rr = append(rr, histRows(4e9, "1", [4]float64{10, 10, 10, 10}, 0.1)...) // another engine, one scrape: no increase
	rr = append(rr, histRows(5e9, "1", [4]float64{11, 12, 13, 14}, 0.5)...) // +1 +2 +3 +4
	d = NewData(trace.MetricsMeta{}, rr)
	h = d.Histogram("t", "h", All)
	want = []Bucket{{0.1, 2 + 1 + 1 + 1}, {0.5, 3 + 1 + 2 + 2}, {1, 4 + 2 + 2 + 3}, {math.Inf(1), 5 + 3 + 3 + 4}}
	if h.Resets != 1 || h.Series != 2 || h.Count != 15 {
		t.Errorf("with reset: %+v", h)
	}
	for i := range want {
		if h.Buckets[i] != want[i] {
			t.Errorf("with reset, bucket %d = %+v, want %+v", i, h.Buckets[i], want[i])
		}
	}
}

// vllmScrape is one scrape of a vLLM page reduced to the summarised names.
func vllmScrape(at int64, running, waiting, kv, preempt, gen, queries, hits float64, ttft [4]float64) []trace.MetricSample {
	model := []trace.Label{{Name: "engine", Value: "0"}, {Name: "model_name", Value: "m"}}
	row := func(name, typ string, v float64) trace.MetricSample {
		return trace.MetricSample{TimeNs: at, SentNs: at - 1e6, ReadNs: at + 1e6, Target: "http://s/metrics", Name: name, Family: name, Type: typ, Labels: model, Value: v}
	}
	rows := []trace.MetricSample{
		{TimeNs: at, Target: "http://s/metrics", Name: trace.ScrapeRowName, Type: trace.MetricScrape, Value: 1, Status: 200},
		row("vllm:num_requests_running", trace.MetricGauge, running),
		row("vllm:num_requests_waiting", trace.MetricGauge, waiting),
		row("vllm:gpu_cache_usage_perc", trace.MetricGauge, kv), // the older name only
		row("vllm:num_preemptions_total", trace.MetricCounter, preempt),
		row("vllm:generation_tokens_total", trace.MetricCounter, gen),
		row("vllm:prefix_cache_queries_total", trace.MetricCounter, queries),
		row("vllm:prefix_cache_hits_total", trace.MetricCounter, hits),
	}
	for i, le := range []string{"0.1", "0.5", "1", "+Inf"} {
		r := row("vllm:time_to_first_token_seconds_bucket", trace.MetricHistogram, ttft[i])
		r.Family = "vllm:time_to_first_token_seconds"
		r.Labels = append(append([]trace.Label(nil), model...), trace.Label{Name: "le", Value: le})
		rows = append(rows, r)
	}
	c := row("vllm:time_to_first_token_seconds_count", trace.MetricHistogram, ttft[3])
	c.Family = "vllm:time_to_first_token_seconds"
	return append(rows, c)
}

func TestSummarizeVLLMThroughFile(t *testing.T) {
	var rows []trace.MetricSample
	rows = append(rows, vllmScrape(1e9, 2, 0, 0.1, 0, 1000, 500, 100, [4]float64{0, 0, 0, 0})...)
	rows = append(rows, vllmScrape(2e9, 6, 3, 0.5, 1, 1400, 900, 300, [4]float64{10, 30, 45, 50})...)
	rows = append(rows, vllmScrape(3e9, 4, 1, 0.3, 3, 2200, 1500, 600, [4]float64{10, 30, 45, 50})...)
	rows = append(rows, trace.MetricSample{TimeNs: 4e9, Target: "http://s/metrics", Name: trace.ScrapeRowName, Type: trace.MetricScrape,
		ErrorKind: trace.ScrapeTimeout, ErrorMessage: "GET http://s/metrics: no complete answer within 1s"})
	path := filepath.Join(t.TempDir(), "r.metrics.parquet")
	w, err := trace.NewMetricsWriter(path, trace.MetricsMeta{IntervalNs: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rows...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	ss := Summarize(d, Window{0, 5e9})
	if len(ss) != 1 {
		t.Fatalf("%d summaries", len(ss))
	}
	s := ss[0]
	if s.Server != "vllm" || s.Scrapes != 4 || s.Failed != 1 || s.FailedByKind[trace.ScrapeTimeout] != 1 {
		t.Errorf("scrapes: %+v", s)
	}
	if s.Running.Max != 6 || s.Running.Min != 2 || s.Running.Mean != 4 || s.Running.Last != 4 {
		t.Errorf("running %+v", s.Running)
	}
	if s.Used["KVCacheUsage"] != "vllm:gpu_cache_usage_perc" || !near(s.KVCacheUsage.Mean, 0.3) || s.KVCacheUsage.Max != 0.5 {
		t.Errorf("kv cache %+v from %q", s.KVCacheUsage, s.Used["KVCacheUsage"])
	}
	if s.Preemptions.Increase != 3 || s.GenerationTokens.Increase != 1200 || !near(s.TokensPerSecond(), 600) {
		t.Errorf("preemptions %+v generation %+v", s.Preemptions, s.GenerationTokens)
	}
	if !s.PrefixHitRateOK || !near(s.PrefixHitRate, 0.5) {
		t.Errorf("prefix hit rate %v (%v)", s.PrefixHitRate, s.PrefixHitRateOK)
	}
	if !s.TTFT.OK || s.TTFT.Count != 50 || !near(s.TTFT.P50.Value, 0.4) {
		t.Errorf("TTFT %+v", s.TTFT)
	}
	if s.ITL.OK || s.E2E.OK || s.TPOT.OK {
		t.Errorf("histograms the page lacks reported: ITL %v E2E %v TPOT %v", s.ITL.OK, s.E2E.OK, s.TPOT.OK)
	}
	// Only the second half: the TTFT buckets did not move.
	h := SummarizeTarget(d, "http://s/metrics", Window{2e9, 3e9})
	if h.TTFT.Count != 0 || !math.IsNaN(h.TTFT.P50.Value) || h.GenerationTokens.Increase != 800 {
		t.Errorf("second half: TTFT %+v generation %+v", h.TTFT, h.GenerationTokens)
	}
	series := d.Find("http://s/metrics", "vllm:num_requests_running", trace.Label{Name: "engine", Value: "0"})
	if len(series) != 1 || len(series[0].Points) != 3 || series[0].Points[1] != (Point{2e9, 6}) {
		t.Errorf("Find: %+v", series)
	}
}

func TestDetectOtherServers(t *testing.T) {
	mk := func(names ...string) *Data {
		var rows []trace.MetricSample
		for i, n := range names {
			rows = append(rows, trace.MetricSample{TimeNs: 1, Target: "x", Name: n, Value: float64(i)})
		}
		return NewData(trace.MetricsMeta{}, rows)
	}
	if n, ok := mk("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage").Detect("x"); !ok || n.Server != "sglang" {
		t.Errorf("sglang page detected as %q", n.Server)
	}
	if n, ok := mk("tgi_queue_size", "tgi_batch_current_size", "tgi_request_duration_count").Detect("x"); !ok || n.Server != "tgi" {
		t.Errorf("tgi page detected as %q", n.Server)
	}
	if _, ok := mk("go_goroutines").Detect("x"); ok {
		t.Error("a page of no known server was recognised")
	}
	for _, v := range []float64{0.005, 1, 2560, math.Inf(1)} {
		got, err := ParseBound(FormatBound(v))
		if err != nil || got != v {
			t.Errorf("bound %v round trip: %v %v", v, got, err)
		}
	}
	if _, err := ParseBound("x" + strconv.Itoa(1)); err == nil {
		t.Error("ParseBound accepted junk")
	}
}
