package sweep

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/telemetry"
)

// StepServer is what the targets' /metrics said during a step (from its
// sidecar, step-NN-....metrics.parquet, over the step's analysis window):
// KV-cache usage as a fraction (mean of the targets' means, the highest
// target's max) and requests waiting and running (sums of the targets'
// means, the highest target's max). A figure no target exported is nil.
type StepServer struct {
	Metrics     string   `json:"metrics"` // the sidecar, relative to the sweep directory
	KVUsageMean *float64 `json:"kv_usage_mean,omitempty"`
	KVUsageMax  *float64 `json:"kv_usage_max,omitempty"`
	WaitingMean *float64 `json:"waiting_mean,omitempty"`
	WaitingMax  *float64 `json:"waiting_max,omitempty"`
	RunningMean *float64 `json:"running_mean,omitempty"`
	RunningMax  *float64 `json:"running_max,omitempty"`

	// Speculative decoding over the targets: accepted / draft tokens, and
	// 1 + accepted / drafts (vLLM's mean acceptance length), from their
	// counters summed; the stream's tokens per decode event beside them.
	SpecAcceptanceRate       *float64 `json:"spec_acceptance_rate,omitempty"`
	SpecMeanAcceptanceLength *float64 `json:"spec_mean_acceptance_length,omitempty"`
	StreamTokensPerEvent     *float64 `json:"stream_tokens_per_event,omitempty"`

	// Energy: the GPUs' joules over the step (every DCGM target's, summed),
	// their mean power, and the step's output tokens per joule and joules
	// per completed request.
	EnergyJ          *float64 `json:"energy_j,omitempty"`
	MeanPowerW       *float64 `json:"mean_power_w,omitempty"`
	TokensPerJoule   *float64 `json:"output_tokens_per_joule,omitempty"`
	JoulesPerRequest *float64 `json:"joules_per_request,omitempty"`
}

// measureServer reduces an analysis' server section to a StepServer; nil
// without one.
func measureServer(s *analyze.Summary) *StepServer {
	if s == nil || s.Server == nil || len(s.Server.Sidecars) == 0 {
		return nil
	}
	st := &StepServer{}
	for _, sc := range s.Server.Sidecars {
		st.Metrics = baseName(sc.Path)
	}
	agg := func(get func(*analyze.ServerTarget) *analyze.ServerGauge, mean bool) (*float64, *float64) {
		var sum, mx float64
		n := 0
		for i := range s.Server.Targets {
			if g := get(&s.Server.Targets[i]); g != nil {
				sum += g.Mean
				mx = max(mx, g.Max)
				n++
			}
		}
		if n == 0 {
			return nil, nil
		}
		if mean {
			sum /= float64(n)
		}
		return &sum, &mx
	}
	st.KVUsageMean, st.KVUsageMax = agg(func(t *analyze.ServerTarget) *analyze.ServerGauge { return t.KVCacheUsage }, true)
	st.WaitingMean, st.WaitingMax = agg(func(t *analyze.ServerTarget) *analyze.ServerGauge { return t.Waiting }, false)
	st.RunningMean, st.RunningMax = agg(func(t *analyze.ServerTarget) *analyze.ServerGauge { return t.Running }, false)
	st.spec(s.Server.Targets)
	st.energy(s)
	return st
}

// spec sums the targets' speculative decoding counts.
func (st *StepServer) spec(ts []analyze.ServerTarget) {
	var drafts, draftTokens, accepted float64
	var events, tokens int64
	for i := range ts {
		sp := ts[i].Spec
		if sp == nil {
			continue
		}
		if sp.Drafts != nil && sp.DraftTokens != nil && sp.AcceptedTokens != nil {
			drafts += sp.Drafts.Increase
			draftTokens += sp.DraftTokens.Increase
			accepted += sp.AcceptedTokens.Increase
		}
		events, tokens = events+sp.StreamEvents, tokens+sp.StreamTokens
	}
	ratio := func(a, b, plus float64) *float64 {
		if b <= 0 {
			return nil
		}
		v := plus + a/b
		return &v
	}
	st.SpecAcceptanceRate = ratio(accepted, draftTokens, 0)
	st.SpecMeanAcceptanceLength = ratio(accepted, drafts, 1)
	if st.SpecMeanAcceptanceLength != nil || events > 0 && tokens > events {
		st.StreamTokensPerEvent = ratio(float64(tokens), float64(events), 0)
	}
}

// energy sums the DCGM targets' energy over the step.
func (st *StepServer) energy(s *analyze.Summary) {
	var joules, watts float64
	n := 0
	for i := range s.Server.Targets {
		if e := s.Server.Targets[i].Energy; e != nil {
			joules, watts, n = joules+e.Joules, watts+e.MeanPowerW, n+1
		}
	}
	if n == 0 {
		return
	}
	st.EnergyJ, st.MeanPowerW = &joules, &watts
	if joules > 0 {
		v := float64(s.TotalOutput) / joules
		st.TokensPerJoule = &v
	}
	if s.Completed > 0 {
		v := joules / float64(s.Completed)
		st.JoulesPerRequest = &v
	}
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// stepScrape starts the step's sidecar beside recPath when o is set; the
// returned sink names it in the run metadata. Scraping never fails a step:
// a sidecar that cannot be opened is a note.
func stepScrape(ctx context.Context, o *telemetry.SidecarOptions, recPath string, sink record.Sink, notes *[]string) (*telemetry.Sidecar, *telemetry.MetaSink, record.Sink) {
	if o == nil || len(o.Endpoints) == 0 {
		return nil, nil, sink
	}
	so := *o
	so.Recording, so.Path, so.Replace = recPath, "", false
	sc, err := telemetry.StartSidecar(ctx, so)
	if err != nil {
		*notes = append(*notes, "not scraping server metrics: "+err.Error())
		return nil, nil, sink
	}
	ms := telemetry.NewMetaSink(sink, sc.Name())
	return sc, ms, ms
}

// finishScrape completes the step's sidecar before its recording closes;
// endpoint failures and a lost sidecar become notes.
func finishScrape(sc *telemetry.Sidecar, ms *telemetry.MetaSink, notes *[]string) {
	if sc == nil {
		return
	}
	res, err := sc.Finish()
	for _, n := range res.Notes() {
		*notes = append(*notes, "scrape: "+n)
	}
	if err != nil {
		ms.Drop()
		*notes = append(*notes, "server metrics lost: "+err.Error())
	}
}

func fixedOrDash(v *float64, digits int) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', digits, 64)
}

func pctOrDash(v *float64, scale float64) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v*scale)
}

// serverCell is a step's server figures in the tables: KV-cache usage
// mean/max (%), requests waiting mean/max.
func (r *StepResult) serverCell() string {
	if r.Server == nil {
		return "-"
	}
	v := r.Server
	out := "KV " + pctOrDash(v.KVUsageMean, 100) + "/" + pctOrDash(v.KVUsageMax, 100) + "%, waiting " +
		pctOrDash(v.WaitingMean, 1) + "/" + pctOrDash(v.WaitingMax, 1)
	if v.SpecMeanAcceptanceLength != nil || v.StreamTokensPerEvent != nil {
		out += ", spec accept " + pctOrDash(v.SpecAcceptanceRate, 100) + "% length " + fixedOrDash(v.SpecMeanAcceptanceLength, 3) +
			" (stream " + fixedOrDash(v.StreamTokensPerEvent, 3) + ")"
	}
	if v.EnergyJ != nil {
		out += ", " + fixedOrDash(v.EnergyJ, 1) + " J, " + fixedOrDash(v.MeanPowerW, 1) + " W, " +
			fixedOrDash(v.TokensPerJoule, 4) + " tok/J, " + fixedOrDash(v.JoulesPerRequest, 3) + " J/req"
	}
	return out
}

// hasServer reports whether any step has server figures.
func (s *Summary) hasServer() bool {
	for i := range s.Steps {
		if s.Steps[i].Server != nil {
			return true
		}
	}
	return false
}

// writeServerText lists the steps' server figures below the table.
func (s *Summary) writeServerText(b *bufio.Writer) {
	if !s.hasServer() {
		return
	}
	fmt.Fprintln(b, "server (from each step's /metrics; mean/max over the step; spec decode and energy from counters over the step):")
	for i := range s.Steps {
		r := &s.Steps[i]
		fmt.Fprintf(b, "%4d %-20s %s\n", r.Index, r.Load.String(), r.serverCell())
	}
}

// serverCharts are KV-cache usage and requests waiting per step (mean and
// max), at the steps' x on the load axis.
func (s *Summary) serverCharts(x func(*StepResult) float64, xl string) []chart {
	if !s.hasServer() {
		return nil
	}
	kv := chart{id: "server-kv", title: "Server KV-cache usage per step", xlabel: xl, ylabel: "%"}
	wt := chart{id: "server-waiting", title: "Server requests waiting per step", xlabel: xl, ylabel: "requests"}
	add := func(c *chart, name, color string, dashed bool, v func(*StepServer) *float64, scale float64) {
		sr := series{name: name, color: color, dashed: dashed}
		for i := range s.Steps {
			r := &s.Steps[i]
			if r.Server == nil || v(r.Server) == nil || r.Requests == 0 {
				continue
			}
			sr.pts = append(sr.pts, point{x: x(r), y: *v(r.Server) * scale, href: r.Report, tip: r.tip(), bad: !r.Pass})
		}
		c.series = append(c.series, sr)
	}
	add(&kv, "mean", colA, false, func(t *StepServer) *float64 { return t.KVUsageMean }, 100)
	add(&kv, "max", colB, true, func(t *StepServer) *float64 { return t.KVUsageMax }, 100)
	add(&wt, "mean", colA, false, func(t *StepServer) *float64 { return t.WaitingMean }, 1)
	add(&wt, "max", colB, true, func(t *StepServer) *float64 { return t.WaitingMax }, 1)
	return []chart{kv, wt}
}
