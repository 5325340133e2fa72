package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// vllmPage is a /metrics page shaped like vLLM V1's with two engines:
// its gauges and counters, and its latency and token histograms with their
// real bucket counts (a few hundred series in all).
func vllmPage() string {
	var b strings.Builder
	engines := []string{"0", "1"}
	lbl := func(e string) string {
		return fmt.Sprintf(`engine="%s",model_name="meta-llama/Llama-3.1-8B-Instruct"`, e)
	}
	for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		fmt.Fprintf(&b, "# HELP %s x\n# TYPE %s gauge\n", g, g)
		for i, e := range engines {
			fmt.Fprintf(&b, "%s{%s} %d.0\n", g, lbl(e), 3+i)
		}
	}
	for _, c := range []string{"vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
		"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total"} {
		fmt.Fprintf(&b, "# HELP %s x\n# TYPE %s counter\n", c, c)
		for i, e := range engines {
			fmt.Fprintf(&b, "%s{%s} %d.0\n", c, lbl(e), 123456+i)
		}
	}
	fmt.Fprintf(&b, "# HELP vllm:request_success_total x\n# TYPE vllm:request_success_total counter\n")
	for _, e := range engines {
		for _, r := range []string{"stop", "length", "abort"} {
			fmt.Fprintf(&b, "vllm:request_success_total{%s,finished_reason=\"%s\"} 42.0\n", lbl(e), r)
		}
	}
	lat := []string{"0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0"}
	req := []string{"0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0"}
	tok := []string{"1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0", "5000.0", "10000.0"}
	for _, h := range []struct {
		name string
		le   []string
	}{
		{"vllm:time_to_first_token_seconds", lat}, {"vllm:inter_token_latency_seconds", lat[:19]},
		{"vllm:time_per_output_token_seconds", lat[:19]}, {"vllm:e2e_request_latency_seconds", req},
		{"vllm:request_queue_time_seconds", req}, {"vllm:request_inference_time_seconds", req},
		{"vllm:request_prefill_time_seconds", req}, {"vllm:request_decode_time_seconds", req},
		{"vllm:request_prompt_tokens", tok}, {"vllm:request_generation_tokens", tok},
	} {
		fmt.Fprintf(&b, "# HELP %s x\n# TYPE %s histogram\n", h.name, h.name)
		for _, e := range engines {
			for i, le := range h.le {
				fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %d.0\n", h.name, lbl(e), le, 10*i)
			}
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} 1000.0\n%s_count{%s} 1000.0\n%s_sum{%s} 1234.5\n", h.name, lbl(e), h.name, lbl(e), h.name, lbl(e))
		}
	}
	return b.String()
}

// BenchmarkScrapeVLLMPage is one scrape of a vLLM-sized page over loopback
// HTTP: request, body, parse, and the rows written to a sidecar file.
func BenchmarkScrapeVLLMPage(b *testing.B) {
	page := vllmPage()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	w, err := trace.NewMetricsWriter(filepath.Join(b.TempDir(), "b.metrics.parquet"), trace.MetricsMeta{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	s, err := New(Options{Endpoints: []string{srv.URL + "/metrics"}, Sink: w})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.ScrapeOnce(ctx); err != nil {
		b.Fatal(err)
	}
	series := (w.Rows() - 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(page)))
	b.ResetTimer()
	for b.Loop() {
		if err := s.ScrapeOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := s.Stats()[0]; st.Failures != 0 {
		b.Fatalf("scrapes failed: %+v", st)
	}
	b.ReportMetric(float64(series), "series")
}
