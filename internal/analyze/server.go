package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// The server section: what each scraped endpoint's /metrics said over the
// analysis window, read from the telemetry sidecar of the recordings
// (trace.MetricsPath, or the file RunMeta.Metrics names; Options.
// ServerMetrics gives one explicitly).
//
// Alignment: a sidecar's times count from its own zero, MetricsMeta.
// StartMonoNs (the scraper starts just before the run); a recording's from
// RunMeta.StartMonoNs. A sample at sidecar time t is at
//
//	t + MetricsMeta.StartMonoNs - RunMeta.StartMonoNs + FileInfo.OffsetNs
//
// on the analysis clock (ServerSidecar.ShiftNs is the sum of the last
// three). Both are CLOCK_MONOTONIC of the host that ran the replay, so the
// shift is exact.
//
// Window: gauges (running, waiting, KV-cache usage) are summarised over the
// scrapes inside [StartNs, EndNs]; counters and histograms over the
// scrapes that bracket it (the last at or before StartNs, the first at or
// after EndNs), because a counter only says what happened between two
// scrapes: the increase may include up to one scrape interval of activity
// on either side. A run's final scrape (taken when it ended) closes the
// window of a whole run.

// ServerPercentiles are the percentiles compared between server and client.
var ServerPercentiles = []float64{50, 90, 99}

// ServerReport is the server section of a Summary.
type ServerReport struct {
	Sidecars []ServerSidecar `json:"sidecars"`
	Targets  []ServerTarget  `json:"targets"`
	Notes    []string        `json:"notes,omitempty"`
}

// ServerSidecar is one sidecar that went into the report.
type ServerSidecar struct {
	Path      string   `json:"path"`
	Recording string   `json:"recording"` // the recording it is aligned with
	Endpoints []string `json:"endpoints"`
	IntervalS float64  `json:"interval_s"`
	ShiftNs   int64    `json:"shift_ns"` // sidecar time + ShiftNs = analysis time
	Aligned   bool     `json:"aligned"`  // false when a start time was missing (ShiftNs is then 0)
}

// ServerTarget is one scraped endpoint over the window.
type ServerTarget struct {
	Target  string `json:"target"` // metrics URL as recorded
	Sidecar int    `json:"sidecar"`
	Server  string `json:"server"` // vllm, sglang, tgi; "" when not recognised
	// FromS and ToS are the analysis window in seconds of the run.
	FromS float64 `json:"window_from_s"`
	ToS   float64 `json:"window_to_s"`

	Scrapes  int             `json:"scrapes"` // in the window
	Failed   int             `json:"failed"`
	Failures []ScrapeFailure `json:"failures,omitempty"` // over the whole sidecar, by kind

	Running      *ServerGauge `json:"running,omitempty"`
	Waiting      *ServerGauge `json:"waiting,omitempty"`
	KVCacheUsage *ServerGauge `json:"kv_cache_usage,omitempty"` // fraction 0..1

	Preemptions      *ServerCounter `json:"preemptions,omitempty"`
	PromptTokens     *ServerCounter `json:"prompt_tokens,omitempty"`
	GenerationTokens *ServerCounter `json:"generation_tokens,omitempty"` // PerSecond: the server's generation throughput
	RequestsFinished *ServerCounter `json:"requests_finished,omitempty"`
	// PrefixCacheHitRate is hits / queries in tokens over the window.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	// ClientPrefixCacheHitRate is the same ratio from the client's side:
	// usage cached tokens / prompt tokens of the completed requests sent to
	// this target that reported cached tokens; ClientMinusServerHitRate
	// their difference. Both nil without reports or the server's counters.
	ClientPrefixCacheHitRate *float64 `json:"client_prefix_cache_hit_rate,omitempty"`
	ClientMinusServerHitRate *float64 `json:"client_minus_server_hit_rate,omitempty"`

	// Latency compares the server's histograms with the client's figures.
	Latency []ServerLatency `json:"latency,omitempty"`

	// Spec is speculative decoding: the server's counters beside the
	// stream's tokens per event. Nil when neither side shows drafting.
	Spec *ServerSpec `json:"spec_decode,omitempty"`
	// Energy is the GPUs' energy over the window (a DCGM exporter's
	// counters). Nil when the target exports none.
	Energy *ServerEnergy `json:"energy,omitempty"`

	// Series are the gauges' samples on the analysis clock, for charts.
	Series ServerSeries `json:"series"`
}

// ScrapeFailure counts the failed scrapes of one kind; Last is the last
// message (for malformed, expfmt's, naming the line).
type ScrapeFailure struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	Last  string `json:"last"`
}

// ServerGauge summarises a gauge over the scrapes in the window.
type ServerGauge struct {
	Metric  string  `json:"metric"`
	Samples int     `json:"samples"`
	Min     float64 `json:"min"`
	Mean    float64 `json:"mean"`
	Max     float64 `json:"max"`
}

// ServerCounter is a counter's increase between the scrapes bracketing the
// window, and that per second.
type ServerCounter struct {
	Metric    string  `json:"metric"`
	Increase  float64 `json:"increase"`
	PerSecond float64 `json:"per_second"`
	Resets    int     `json:"resets,omitempty"`
}

// ServerLatency is one server histogram beside the client's figure.
type ServerLatency struct {
	Metric       string   `json:"metric"` // ttft, itl, e2el, tpot, queue (client figures: the first three)
	Family       string   `json:"family"`
	Observations float64  `json:"observations"`             // in the bracketing scrapes
	MeanMs       *float64 `json:"mean_ms,omitempty"`        // exact: _sum / _count
	Client       int      `json:"client_samples"`           // client samples compared, 0 for none
	ClientMeanMs *float64 `json:"client_mean_ms,omitempty"` // of those samples
	// ClientMinusServerMeanMs compares the exact means: unlike the
	// quantiles it carries no bucket interpolation error (but the two sides
	// may count a few different requests at the window's edges).
	ClientMinusServerMeanMs *float64         `json:"client_minus_server_mean_ms,omitempty"`
	Quantiles               []ServerQuantile `json:"quantiles"`
}

// ServerQuantile is one percentile: the server's estimate (Prometheus's
// histogram_quantile) with the bucket it fell in, the client's (numpy's
// linear percentile of its samples at this target) and client minus
// server: network plus client overhead, which the server's clock cannot
// see. Nil is not known (no observations, the +Inf bucket's upper bound,
// no client samples).
type ServerQuantile struct {
	P                   float64  `json:"p"`
	ServerMs            *float64 `json:"server_ms"`
	BucketLowMs         *float64 `json:"bucket_low_ms"`
	BucketHighMs        *float64 `json:"bucket_high_ms"` // nil: +Inf
	ClientMs            *float64 `json:"client_ms"`
	ClientMinusServerMs *float64 `json:"client_minus_server_ms"`
}

// ServerSpec is speculative decoding over the window. From the server's
// counters (vLLM): AcceptanceRate = accepted / draft tokens, and
// MeanAcceptanceLength = 1 + accepted / drafts, vLLM's definition: the
// tokens one step emits, the bonus token included. SGLang exports only
// its own mean acceptance length and (newer versions) acceptance rate, as
// gauges (ServerAcceptLength, ServerAcceptRate: their means over the
// window's scrapes). From the stream: the tokens per event after
// the first (one event per decode step; exact when the server reports
// usage on every chunk) of the successful streamed requests sent to this
// target.
type ServerSpec struct {
	Drafts               *ServerCounter `json:"drafts,omitempty"`
	DraftTokens          *ServerCounter `json:"draft_tokens,omitempty"`
	AcceptedTokens       *ServerCounter `json:"accepted_tokens,omitempty"`
	AcceptanceRate       *float64       `json:"acceptance_rate,omitempty"`
	MeanAcceptanceLength *float64       `json:"mean_acceptance_length,omitempty"`
	ServerAcceptLength   *ServerGauge   `json:"server_accept_length,omitempty"`
	ServerAcceptRate     *ServerGauge   `json:"server_accept_rate,omitempty"` // SGLang's gauge, 0..1

	// The stream's side: decode events (content events after the first)
	// and their tokens; StreamTokensPerEvent is their ratio, and the
	// percentiles spread it over requests (each request's own mean).
	StreamEvents         int64    `json:"stream_decode_events"`
	StreamTokens         int64    `json:"stream_decode_tokens"`
	StreamTokensPerEvent *float64 `json:"stream_tokens_per_event,omitempty"`
	StreamPerRequest     []PValue `json:"stream_tokens_per_event_per_request,omitempty"`
}

// PValue is one percentile of a distribution.
type PValue struct {
	P float64 `json:"p"`
	V float64 `json:"v"`
}

// ServerEnergy is the GPUs' energy over the window, from the increase of
// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since boot, one series per
// GPU) between the scrapes bracketing it, summed over GPUs.
// MeanPowerW is Joules over the bracketing scrapes' span; PowerGaugeW the
// mean over the window's scrapes of DCGM_FI_DEV_POWER_USAGE summed over
// GPUs. The per-token and per-request figures divide by the whole
// analysis' output tokens and completed requests (every target's: a GPU
// exporter does not know which requests it served).
type ServerEnergy struct {
	Metric           string   `json:"metric"`
	GPUs             int      `json:"gpus"`
	Joules           float64  `json:"joules"`
	SpanS            float64  `json:"span_s"`
	MeanPowerW       float64  `json:"mean_power_w"`
	PowerGaugeW      *float64 `json:"power_gauge_w,omitempty"`
	Resets           int      `json:"resets,omitempty"`
	OutputTokens     int64    `json:"output_tokens"`
	TokensPerJoule   *float64 `json:"output_tokens_per_joule,omitempty"`
	Requests         int      `json:"requests"`
	JoulesPerRequest *float64 `json:"joules_per_request,omitempty"`
}

// ServerPoint is one sample: seconds on the analysis clock, value.
type ServerPoint struct {
	T float64 `json:"t_s"`
	V float64 `json:"v"`
}

// ServerSeries are a target's gauges over the window.
type ServerSeries struct {
	Running      []ServerPoint `json:"running,omitempty"`
	Waiting      []ServerPoint `json:"waiting,omitempty"`
	KVCacheUsage []ServerPoint `json:"kv_cache_usage,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// attachServer finds the sidecars of s.Files (or Options.ServerMetrics)
// and fills s.Server; without any it leaves it nil. Only an explicitly
// given sidecar that cannot be read is an error (bad input); a missing or
// unreadable one found by name is a note.
func (s *Summary) attachServer() error {
	type side struct {
		path string
		file int
	}
	var sides []side
	var notes []string
	if p := s.Options.ServerMetrics; p != "" {
		sides = append(sides, side{p, 0})
	} else {
		seen := map[string]bool{}
		for i, f := range s.Files {
			p := trace.MetricsPath(f.Path)
			if f.Meta.Metrics != "" {
				p = filepath.Join(filepath.Dir(f.Path), f.Meta.Metrics)
			}
			if seen[p] {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				if f.Meta.Metrics != "" {
					notes = append(notes, fmt.Sprintf("%s names the sidecar %s, which is missing: %v", f.Path, f.Meta.Metrics, errors.Unwrap(err)))
				}
				continue
			}
			seen[p] = true
			sides = append(sides, side{p, i})
		}
	}
	if len(sides) == 0 && len(notes) == 0 {
		return nil
	}
	r := &ServerReport{Notes: notes}
	for _, sd := range sides {
		d, err := telemetry.Read(sd.path)
		if err != nil {
			if s.Options.ServerMetrics != "" {
				return fmt.Errorf("reading the server metrics %s: %w: %w", sd.path, err, ErrBadInput)
			}
			r.Notes = append(r.Notes, fmt.Sprintf("%s: not readable, left out: %v", sd.path, err))
			continue
		}
		s.addSidecar(r, sd.path, sd.file, d)
	}
	s.Server = r
	return nil
}

// addSidecar adds one sidecar's targets to r, aligned with s.Files[file].
func (s *Summary) addSidecar(r *ServerReport, path string, file int, d *telemetry.Data) {
	f := s.Files[min(file, len(s.Files)-1)]
	sc := ServerSidecar{Path: path, Recording: f.Path, Endpoints: d.Meta.Endpoints,
		IntervalS: float64(d.Meta.IntervalNs) / 1e9}
	if d.Meta.StartMonoNs != 0 && f.Meta.StartMonoNs != 0 {
		sc.ShiftNs, sc.Aligned = d.Meta.StartMonoNs-f.Meta.StartMonoNs+f.OffsetNs, true
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no start time in the sidecar or the recording: its times are taken as the run's", path))
	}
	idx := len(r.Sidecars)
	r.Sidecars = append(r.Sidecars, sc)
	// The analysis window on the sidecar's clock.
	strict := telemetry.Window{From: s.StartNs - sc.ShiftNs, To: s.EndNs - sc.ShiftNs}
	for _, target := range d.Targets() {
		r.Targets = append(r.Targets, s.serverTarget(d, target, idx, sc.ShiftNs, strict))
	}
}

// bracket widens w to the successful scrapes of target around it: the
// last at or before From (counters use it themselves) and the first at or
// after To.
func bracket(d *telemetry.Data, target string, w telemetry.Window) telemetry.Window {
	for _, sc := range d.Scrapes { // in time order
		if sc.Target == target && sc.OK && sc.TimeNs >= w.To {
			w.To = sc.TimeNs
			break
		}
	}
	return w
}

func (s *Summary) serverTarget(d *telemetry.Data, target string, sidecar int, shift int64, strict telemetry.Window) ServerTarget {
	t := ServerTarget{Target: target, Sidecar: sidecar, FromS: float64(s.StartNs) / 1e9, ToS: float64(s.EndNs) / 1e9}
	g := telemetry.SummarizeTarget(d, target, strict)
	c := telemetry.SummarizeTarget(d, target, bracket(d, target, strict))
	t.Server, t.Scrapes, t.Failed = g.Server, g.Scrapes, g.Failed
	t.Failures = scrapeFailures(d, target)

	gauge := func(field string, st telemetry.GaugeStat) *ServerGauge {
		if !st.OK || finite(st.Min) == nil || finite(st.Mean) == nil || finite(st.Max) == nil {
			return nil // a server may export NaN; JSON cannot carry it
		}
		return &ServerGauge{Metric: g.Used[field], Samples: st.N, Min: st.Min, Mean: st.Mean, Max: st.Max}
	}
	t.Running, t.Waiting, t.KVCacheUsage = gauge("Running", g.Running), gauge("Waiting", g.Waiting), gauge("KVCacheUsage", g.KVCacheUsage)
	counter := func(field string, st telemetry.CounterStat) *ServerCounter {
		if !st.OK || finite(st.Increase) == nil || finite(st.PerSecond) == nil {
			return nil
		}
		return &ServerCounter{Metric: c.Used[field], Increase: st.Increase, PerSecond: st.PerSecond, Resets: st.Resets}
	}
	t.Preemptions, t.PromptTokens = counter("Preemptions", c.Preemptions), counter("PromptTokens", c.PromptTokens)
	t.GenerationTokens, t.RequestsFinished = counter("GenerationTokens", c.GenerationTokens), counter("Requests", c.Requests)
	if c.PrefixHitRateOK {
		t.PrefixCacheHitRate = finite(c.PrefixHitRate)
	}
	if t.PrefixCacheHitRate != nil {
		if r := s.clientHitRate(target); r != nil {
			t.ClientPrefixCacheHitRate = r
			t.ClientMinusServerHitRate = finite(*r - *t.PrefixCacheHitRate)
		}
	}

	t.Spec = s.serverSpec(target, c, counter, gauge("SpecAcceptLength", g.SpecAcceptLength))
	if t.Spec != nil {
		t.Spec.ServerAcceptRate = gauge("SpecAcceptRate", g.SpecAcceptRate)
	}
	t.Energy = s.serverEnergy(g, c)

	client := s.clientSamples(target)
	for _, h := range []struct {
		metric, field string
		st            telemetry.HistogramStat
	}{{"ttft", "TTFT", c.TTFT}, {"itl", "ITL", c.ITL}, {"tpot", "TPOT", c.TPOT}, {"e2el", "E2E", c.E2E}, {"queue", "QueueTime", c.QueueTime}} {
		if !h.st.OK {
			continue
		}
		if finite(h.st.Count) == nil {
			continue
		}
		l := ServerLatency{Metric: h.metric, Family: c.Used[h.field], Observations: h.st.Count, MeanMs: finite(h.st.Mean * 1e3)}
		cs := client[h.metric]
		l.Client = len(cs)
		if len(cs) > 0 {
			l.ClientMeanMs = finite(sum(cs) / float64(len(cs)))
			if l.ClientMeanMs != nil && l.MeanMs != nil {
				l.ClientMinusServerMeanMs = finite(*l.ClientMeanMs - *l.MeanMs)
			}
		}
		for _, p := range ServerPercentiles {
			q := h.st.Quantile(p / 100)
			sq := ServerQuantile{P: p, ServerMs: finite(q.Value * 1e3), BucketLowMs: finite(q.Lower * 1e3), BucketHighMs: finite(q.Upper * 1e3)}
			if len(cs) > 0 {
				sq.ClientMs = finite(Percentile(cs, p))
				if sq.ClientMs != nil && sq.ServerMs != nil {
					sq.ClientMinusServerMs = finite(*sq.ClientMs - *sq.ServerMs)
				}
			}
			l.Quantiles = append(l.Quantiles, sq)
		}
		t.Latency = append(t.Latency, l)
	}

	points := func(field string, agg telemetry.Agg) []ServerPoint {
		name := g.Used[field]
		if name == "" {
			return nil
		}
		var out []ServerPoint
		for _, p := range telemetry.Combine(d.Find(target, name), agg) {
			if p.TimeNs >= strict.From && p.TimeNs <= strict.To && finite(p.Value) != nil {
				out = append(out, ServerPoint{T: float64(p.TimeNs+shift) / 1e9, V: p.Value})
			}
		}
		return out
	}
	t.Series = ServerSeries{Running: points("Running", telemetry.AggSum), Waiting: points("Waiting", telemetry.AggSum),
		KVCacheUsage: points("KVCacheUsage", telemetry.AggMean)}
	return t
}

// clientHitRate is the cached / prompt tokens of the completed requests
// sent to target (its metrics URL) that reported cached tokens; nil when
// none did.
func (s *Summary) clientHitRate(target string) *float64 {
	var cached, prompts int64
	keys := map[string]bool{}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if _, done := keys[q.Target]; !done {
			keys[q.Target] = telemetry.MetricsURL(telemetry.Redact(q.Target)) == target
		}
		if keys[q.Target] && q.Success && q.CachedTokens >= 0 {
			cached += int64(q.CachedTokens)
			prompts += int64(q.PromptTokens)
		}
	}
	if prompts == 0 {
		return nil
	}
	return finite(float64(cached) / float64(prompts))
}

// scrapeFailures counts target's failed scrapes by kind, keeping the last
// message of each.
func scrapeFailures(d *telemetry.Data, target string) []ScrapeFailure {
	by := map[string]*ScrapeFailure{}
	var out []ScrapeFailure
	for _, sc := range d.ScrapesOf(target, telemetry.All) {
		if sc.OK {
			continue
		}
		f := by[sc.ErrorKind]
		if f == nil {
			f = &ScrapeFailure{Kind: sc.ErrorKind}
			by[sc.ErrorKind] = f
		}
		f.Count++
		f.Last = sc.ErrorMessage
	}
	for _, f := range by {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b ScrapeFailure) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}

// clientSamples are the client's figures in ms, sorted, of the analyzed
// requests sent to the target whose metrics URL is target: TTFT (streamed
// successes), E2EL (successes) and ITL (the gaps between their last
// ContentEvents events, as the server observes one per step with tokens;
// empty when the run was too large to keep event times).
func (s *Summary) clientSamples(target string) map[string][]float64 {
	out := map[string][]float64{}
	keys := map[string]bool{}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		k := q.Target
		if _, done := keys[k]; !done {
			keys[k] = telemetry.MetricsURL(telemetry.Redact(k)) == target
		}
		if !keys[k] || !q.Success {
			continue
		}
		out["e2el"] = append(out["e2el"], float64(q.E2ELNs)/1e6)
		if q.NonStreaming || q.Events == 0 {
			continue
		}
		out["ttft"] = append(out["ttft"], float64(q.TTFTNs)/1e6)
		gaps := s.requestGaps(q)
		if k := int(q.ContentEvents) - 1; k >= 0 && k < len(gaps) {
			gaps = gaps[len(gaps)-k:] // the server times steps with tokens: not the gap after a role-only chunk
		}
		for _, g := range gaps {
			out["itl"] = append(out["itl"], g*1e3)
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}
