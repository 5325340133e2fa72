// Package telemetry records what a server's Prometheus endpoint said while
// tracekit measured it, and reads it back for analysis. Client metrics say
// what happened; the server's say why: KV-cache usage, running and waiting
// requests, preemptions, prefix-cache hits, and its own TTFT and ITL
// histograms.
//
// # Recording
//
// In: metrics URLs (MetricsURL turns a target base URL into BASE/metrics),
// an interval, the run clock. Out: rows to a Sink, normally a
// trace.MetricsWriter on trace.MetricsPath(recording), the sidecar format
// documented in trace (trace.MetricSample).
//
//	o := telemetry.Options{Endpoints: []string{telemetry.MetricsURL(base)},
//		Interval: time.Second, Clock: runClock}
//	w, err := trace.NewMetricsWriter(trace.MetricsPath(recPath), telemetry.MetricsMeta(o, runMeta, recPath))
//	o.Sink = w
//	s, err := telemetry.New(o)
//	s.Start(ctx)      // returns after the first scrape of each endpoint
//	... the run ...
//	s.Stop()          // cancels what is in flight, waits, returns the Sink's error
//	s.ScrapeOnce(ctx) // optional: the state at the end of the run
//	w.Close()
//
// Each endpoint is scraped at once (Start waits for it: the run's
// baseline) and then every Interval on its own goroutine (a time.Ticker: a
// scrape still running when the next is due makes that one wait for the
// following tick, so a slow server never causes bursts). The HTTP client is the scraper's own (net/http, its own
// connection pool); nothing is shared with replay's read path, no lock
// included: the only lock a scrape takes around the Sink is the scraper's.
// Memory is bounded: one page buffer and its rows per endpoint, reused;
// the sidecar writer flushes a row group every trace.RowGroupRows rows.
//
// Timing: a scrape is stamped with the run clock just before the request is
// handed to the HTTP client (SentNs, so it includes any connect) and when
// its body has been read (ReadNs). Both are stored, and TimeNs, the
// midpoint, is the time analysis attributes the scrape's samples to: the
// server produced the page somewhere between the two.
//
// Every scrape writes one status row (trace.MetricScrape; Value 1 when it
// succeeded, like Prometheus's "up") followed by its samples. A failed
// scrape writes its status row alone, with an error kind and a message
// that never carries credentials (URLs are recorded without user info or
// query; Options.Header is never recorded), and the endpoint is tried again
// at the next tick:
//
//   - timeout: no complete answer within Options.Timeout (default Interval);
//   - connect: dial, TLS or read failure;
//   - http_status: any status but 200 and 404;
//   - malformed: the body is not valid exposition text; the message is
//     expfmt's, which names the line;
//   - too_large: the body exceeded Options.MaxBodyBytes;
//   - not_found: HTTP 404, as from Ollama, which has no /metrics. This is
//     recorded once and the endpoint is not scraped again in the run: a
//     missing route does not appear mid-run.
//
// A scrape cut short by Stop (or by the Start context) is not recorded: the
// run ended, the server did not fail.
//
// Requests carry X-Tracekit-Probe: 1 (the capture proxy forwards such
// requests but never records them) and ask for the text format 0.0.4; with
// Options.OpenMetrics they ask for OpenMetrics 1.0 first. The answer is
// parsed by its Content-Type with github.com/prometheus/common/expfmt.
// Series are stored whole: histogram buckets with their le label as they
// come, +Inf included, then _sum and _count; summaries with their quantile
// label, then _sum and _count. Exposition timestamps are ignored.
//
// StartSidecar does all of this for one run: it opens
// trace.MetricsPath(recording) (refusing an existing file, or with Replace
// writing beside it and renaming over it once complete), starts the scraper
// with its own zero (MetricsMeta.StartMonoNs, taken just before the run
// starts its clock) and Finish stops it, takes the final scrape and
// completes the file. MetaSink wraps the run's record.Sink so the
// recording's RunMeta.Metrics names the sidecar; analysis moves a sample at
// sidecar time t to t + MetricsMeta.StartMonoNs - RunMeta.StartMonoNs on
// the recording's clock, so the run itself knows nothing of the scraper.
//
// # Analysis
//
// Read (or NewData, for rows in memory) arranges a sidecar by series:
// Data.Find gives one metric's series at a target, each Series its Points
// in time order. Over a Window [From, To] of the run clock:
//
//   - Gauge: min, mean, max of the samples in the window and the last at or
//     before To; Combine merges per-engine series first (sum or mean).
//   - Counter: the increase from the last sample at or before From (the
//     first in the window when there is none, flagged FirstIsPartial) to the
//     last at or before To, summed over consecutive samples, where a drop is
//     a reset and the new value is the increase since it. PerSecond divides
//     by the time between those two samples; it does not extrapolate.
//   - Data.Histogram: the same increase per bucket (a scrape in which any
//     bucket or the count fell is a reset of the whole histogram), summed
//     over series by le, then quantiles by Prometheus's histogram_quantile
//     (HistogramQuantile states the interpolation). Each Quantile reports
//     the bucket it fell in, [Lower, Upper]: the true quantile of the
//     server's observations lies there, so a client-side percentile
//     "agrees within the bucket width" when it is inside that bucket or
//     within Width() of the estimate.
//
// Summarize / SummarizeTarget put these together under the names of a
// recognised server (VLLM, SGLang, TGI; Data.Detect picks the set with
// the most names present): requests running and waiting, KV-cache usage,
// preemptions, prompt and generation tokens (TokensPerSecond), the prefix
// cache hit rate (hits / queries, in tokens, over the window), and the
// TTFT, ITL, TPOT, E2E and queue-time histograms, speculative decoding's
// draft and accepted counters (SGLang: its acceptance-length gauge), plus
// counts of failed scrapes by kind. A metric the server does not export
// has OK false. Any target exporting a DCGM exporter's energy counter and
// power gauge (DCGMEnergy, DCGMPower) also gets them summed over GPUs,
// recognised server or not.
package telemetry
