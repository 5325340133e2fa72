package mock

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape parses the whole /metrics page as Prometheus text.
func scrape(t *testing.T, srv *Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("/metrics does not parse as Prometheus text: %v\n%s", err, b)
	}
	return fams
}

// one returns the single series of a family, checking its model_name.
func one(t *testing.T, fams map[string]*dto.MetricFamily, name, model string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("family %s: %v", name, f)
	}
	m := f.Metric[0]
	if len(m.Label) != 1 || m.Label[0].GetName() != "model_name" || m.Label[0].GetValue() != model {
		t.Fatalf("%s labels %v", name, m.Label)
	}
	return m
}

// checkHistogram compares a scraped histogram with the observations
// derived from the log: every cumulative bucket and the count, and the
// bounds with vLLM's.
func checkHistogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, bounds []float64, ns []int64) {
	t.Helper()
	f := fams[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s: not a histogram: %v", name, f)
	}
	h := one(t, fams, name, "tracekit-mock").GetHistogram()
	if got := h.GetSampleCount(); got != uint64(len(ns)) {
		t.Fatalf("%s: count %d, the log has %d observations", name, got, len(ns))
	}
	if len(h.Bucket) != len(bounds)+1 || !math.IsInf(h.Bucket[len(bounds)].GetUpperBound(), 1) || h.Bucket[len(bounds)].GetCumulativeCount() != uint64(len(ns)) {
		t.Fatalf("%s: %d buckets, want vLLM's %d and +Inf holding the count", name, len(h.Bucket), len(bounds))
	}
	var sum float64
	for _, v := range ns {
		sum += float64(v) / 1e9
	}
	if d := h.GetSampleSum() - sum; d > 1e-6 || d < -1e-6 {
		t.Fatalf("%s: sum %g, the log's %g", name, h.GetSampleSum(), sum)
	}
	for i, b := range h.Bucket[:len(bounds)] {
		if b.GetUpperBound() != bounds[i] {
			t.Fatalf("%s bucket %d: le %g, vLLM's %g", name, i, b.GetUpperBound(), bounds[i])
		}
		want := uint64(0)
		for _, v := range ns {
			if float64(v)/1e9 <= bounds[i] {
				want++
			}
		}
		if b.GetCumulativeCount() != want {
			t.Fatalf("%s le=%g: %d, the log gives %d", name, bounds[i], b.GetCumulativeCount(), want)
		}
	}
}

// TestLatencyHistogramsMatchTheLog: vLLM's latency histograms on /metrics
// hold exactly what the ground-truth log says happened: TTFT from arrival
// to the first token's event (the model's planned TTFT for a body that is
// not streamed), an inter-token latency per later token event, end-to-end
// and queue time per request that got a batch slot.
func TestLatencyHistogramsMatchTheLog(t *testing.T) {
	srv := startMock(t, func(c *Config) {
		c.Latency.PrefillPerToken = Duration(time.Millisecond) // TTFTs from 6 to 45 ms: several buckets
		c.Latency.DecodeBase = Duration(3 * time.Millisecond)
		c.Latency.JitterCV = 0.8
		c.Latency.TokensPerEvent = 2
		c.Latency.MaxNumSeqs = 2 // some queueing
	})
	errs := make(chan error, 16)
	for i := range 12 {
		go func() {
			words := strings.Repeat("word ", 1+i*3)
			errs <- postDrain(srv, chatBody(6+i, i%4 != 3, "user", words), fmt.Sprint("h", i))
		}()
	}
	for range 12 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status=503", "disconnect=3", "stall=20ms@2"} {
		resp := faultRequest(t, srv, f, "f-"+f)
		io.Copy(io.Discard, resp.Body)
	}
	waitFor(t, "every slot released", func() bool { return srv.Stats().Running == 0 })

	var ttft, itl, e2e, queue []int64
	for _, e := range srv.Log() {
		if e.AdmitMonoNs == 0 {
			continue // never reached the batch: no latency of its own
		}
		e2e = append(e2e, e.DoneMonoNs-e.ArrivalMonoNs)
		queue = append(queue, e.AdmitMonoNs-e.ArrivalMonoNs)
		if len(e.EventMonoNs) == 0 {
			ttft = append(ttft, e.PlannedTTFTNs)
			continue
		}
		last := int64(0)
		for i, tok := range e.EventTokens {
			if tok == 0 {
				continue
			}
			if last == 0 {
				ttft = append(ttft, e.EventMonoNs[i]-e.ArrivalMonoNs)
			} else {
				itl = append(itl, e.EventMonoNs[i]-last)
			}
			last = e.EventMonoNs[i]
		}
	}
	if len(ttft) != 14 || len(e2e) != 14 || len(itl) < 20 {
		t.Fatalf("%d TTFTs, %d requests, %d ITLs in the log", len(ttft), len(e2e), len(itl))
	}
	if slices.Min(ttft) == slices.Max(ttft) {
		t.Fatal("all TTFTs equal: the test would not see misplaced buckets")
	}
	fams := scrape(t, srv)
	checkHistogram(t, fams, "vllm:time_to_first_token_seconds", ttftBuckets, ttft)
	checkHistogram(t, fams, "vllm:inter_token_latency_seconds", itlBuckets, itl)
	checkHistogram(t, fams, "vllm:time_per_output_token_seconds", itlBuckets, itl)
	checkHistogram(t, fams, "vllm:e2e_request_latency_seconds", requestLatencyBuckets, e2e)
	checkHistogram(t, fams, "vllm:request_queue_time_seconds", requestLatencyBuckets, queue)
	if v := one(t, fams, "vllm:num_preemptions_total", "tracekit-mock").GetCounter().GetValue(); v != 0 {
		t.Fatalf("preemptions %g", v)
	}
	if v := one(t, fams, "vllm:kv_cache_usage_perc", "tracekit-mock").GetGauge().GetValue(); v != 0 {
		t.Fatalf("KV-cache usage %g with nothing running", v)
	}
	if fams["tracekit_mock_event_lateness_seconds"].GetType() != dto.MetricType_SUMMARY {
		t.Fatal("the lateness summary did not parse as one")
	}
}

// TestKVCacheUsageModel: while a request runs, the gauge is its prompt
// and the tokens sent so far over prefix_cache_tokens; it returns to 0.
func TestKVCacheUsageModel(t *testing.T) {
	srv := startMock(t, func(c *Config) {
		c.Latency.PrefixCacheTokens = 100
		c.Latency.DecodeBase = Duration(time.Hour) // the second token never comes while we look
	})
	c := dialRaw(t, srv)
	c.send("kv", "", true) // prompt "hi": 1 token; 3 tokens asked
	br := c.br
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":" `) { // the first token's event
			break
		}
	}
	// The event is logged (and counted) right after its write returned.
	waitFor(t, "the first token's event to be logged", func() bool { return srv.m.events.Load() == 2 })
	// Prompt 1 + first token 1 of capacity 100.
	if v := one(t, scrape(t, srv), "vllm:kv_cache_usage_perc", "tracekit-mock").GetGauge().GetValue(); v != 0.02 {
		t.Fatalf("KV-cache usage %g, want (1 prompt + 1 output token) / 100", v)
	}
	c.conn.Close()
	waitFor(t, "the slot to be released", func() bool { return srv.Stats().Running == 0 })
	if v := one(t, scrape(t, srv), "vllm:kv_cache_usage_perc", "tracekit-mock").GetGauge().GetValue(); v != 0 {
		t.Fatalf("KV-cache usage %g after the request left", v)
	}
}

// TestHistogramObserveAllocatesNothing: observing is on the event hot path.
func TestHistogramObserveAllocatesNothing(t *testing.T) {
	h := newHistogram(itlBuckets)
	if n := testing.AllocsPerRun(1000, func() { h.observe(12_345_678) }); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
	if got := h.counts[1].Load(); got != 1001 { // 12.3 ms: le=0.025
		t.Fatalf("bucket le=0.025 holds %d", got)
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := newHistogram(ttftBuckets)
	for i := range b.N {
		h.observe(int64(i%4096) * 1e6)
	}
}
