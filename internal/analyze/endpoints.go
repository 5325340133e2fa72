package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// Per-endpoint figures. A run may send several APIs (trace.Endpoints):
// vLLM's block stays the total of every request sent, but TTFT, TPOT and
// ITL only ever take the generating APIs' streams (a request to
// embeddings, rerank or score is non-streaming: Derive), and each
// endpoint gets its own figures with its peers' definitions: for the
// generating APIs TTFT (first streamed output of any kind), AIPerf's time
// to first output token (TTFO: the first answer text or tool call, after
// any reasoning), TPOT, ITL and reasoning tokens; for the others latency,
// requests, input tokens and items per second.

// fileDefaults is what an input file's rows leave implicit.
type fileDefaults struct {
	// endpoint replaces a row's "" (recordings before schema 4): the run's
	// --endpoint, chat or completions.
	endpoint string
	// noReasoning: the file predates the reasoning_tokens column, whose
	// zero then means "not reported" (-1).
	noReasoning bool
	// model replaces a row's "" model: the run's --model.
	model string
}

// fileDefaultsOf reads the run's endpoint from its configuration (replay
// stores --endpoint there; chat when absent) and whether the file holds
// the reasoning_tokens column.
func fileDefaultsOf(meta trace.RunMeta, hasReasoning bool) fileDefaults {
	d := fileDefaults{endpoint: trace.EndpointChat, noReasoning: !hasReasoning, model: meta.LoadSettings().Model}
	if v, ok := meta.Config["endpoint"]; ok && fmt.Sprint(v) == trace.EndpointCompletions {
		d.endpoint = trace.EndpointCompletions
	}
	return d
}

// apply fills what the file leaves implicit in r.
func (d fileDefaults) apply(r *trace.Record) {
	if r.Endpoint == "" {
		r.Endpoint = d.endpoint
	}
	if d.noReasoning {
		r.ReasoningTokens = -1
	}
	if r.Model == "" {
		r.Model = d.model
	}
}

// endpointITL returns the per-event and per-token ITL distributions of a
// generating endpoint. The first endpoint seen uses the run's own, so a
// run of one endpoint keeps its gaps once; mergeEndpointITL adds the
// others' into the run's at the end.
func (a *accumulator) endpointITL(ep string) [2]*Dist {
	if d, ok := a.epITL[ep]; ok {
		return d
	}
	d := [2]*Dist{a.dists["itl"], a.dists["itl_per_token"]}
	if len(a.epITL) == 0 {
		a.firstEP = ep
	} else {
		d = [2]*Dist{newDist(a.opts.MaxExactSamples), newDist(a.opts.MaxExactSamples)}
	}
	if d[1].Len() == 0 && d[0].Len() == 0 {
		d[1].twin = d[0] // until an event carries other than one token
	}
	a.epITL[ep] = d
	return d
}

// settleTwins ends the per-token ITL's sharing of the per-event samples:
// a run of one endpoint aliases them (read only from here on: the stats
// are computed once for both), a run of several copies them, since the
// endpoints' samples are then added into the run's.
func (a *accumulator) settleTwins() {
	for _, d := range a.epITL {
		if d[1].twin == nil {
			continue
		}
		if len(a.epITL) > 1 {
			d[1].untwin()
			continue
		}
		n := len(d[0].samples)
		d[1].samples, d[1].sorted, d[1].twin = d[0].samples[:n:n], d[0].sorted, nil
	}
}

// mergeEndpointITL computes each endpoint's per-event and per-token ITL
// statistics when the run streamed more than one generating endpoint
// (else they are the run's), then adds the other endpoints' gaps into the
// run's distributions.
func (a *accumulator) mergeEndpointITL() map[string][2]Stats {
	if len(a.epITL) < 2 {
		return nil
	}
	out := map[string][2]Stats{}
	for ep, d := range a.epITL {
		out[ep] = [2]Stats{d[0].Stats(a.opts.Percentiles), d[1].Stats(a.opts.Percentiles)}
	}
	for ep, d := range a.epITL {
		if ep == a.firstEP {
			continue
		}
		for k, name := range []string{"itl", "itl_per_token"} {
			d[k].each(a.dists[name].Add)
		}
	}
	return out
}

// each calls f with every sample (a histogram's as its buckets'
// representatives).
func (d *Dist) each(f func(float64)) {
	d.materialize()
	if d.hist == nil {
		for _, v := range d.samples {
			f(v)
		}
		return
	}
	for r := range d.hist.n {
		f(d.hist.value(r))
	}
}

// EndpointStats is one endpoint's part of a run. Throughputs are per
// second of the run's Duration (so the endpoints' add up to the run's);
// latency Stats are in milliseconds.
type EndpointStats struct {
	Endpoint  string `json:"endpoint"`
	Generates bool   `json:"generates"`
	// Requests analyzed = Completed + Failed + NotSent, as the run's.
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	NotSent   int `json:"not_sent"`
	// TotalInput sums the completed requests' usage prompt_tokens (else
	// the client's count).
	TotalInput        int64   `json:"total_input_tokens"`
	RequestThroughput float64 `json:"request_throughput"`
	InputThroughput   float64 `json:"input_token_throughput"`
	// Latency of the completed requests: for a generating API vLLM's E2EL
	// (last event - start), for the others done_ns - start (the whole
	// body read).
	Latency Stats `json:"latency"`

	// Generation: the generating APIs' figures; nil for the others.
	Generation *GenerationStats `json:"generation,omitempty"`
	// Items: the non-generating APIs' figures; nil for the others.
	Items *ItemStats `json:"items,omitempty"`
}

// GenerationStats are a generating endpoint's streaming figures, over its
// completed streamed requests (non-streaming ones add none).
type GenerationStats struct {
	TotalOutput      int64   `json:"total_output_tokens"`
	OutputThroughput float64 `json:"output_throughput"`
	// TTFT: first streamed event of any kind (reasoning included) - start.
	TTFT Stats `json:"ttft"`
	// TTFO is AIPerf's time to first output token: the first event with
	// answer text or a tool call (after any reasoning) - start. NoAnswer
	// counts the completed streams with no such event (reasoning only),
	// left out of TTFO.
	TTFO     Stats `json:"ttfo"`
	NoAnswer int   `json:"no_answer"`
	TPOT     Stats `json:"tpot"`
	// ITL under the run's --itl definition (ITLDefinition).
	ITL           Stats  `json:"itl"`
	ITLDefinition string `json:"itl_definition"`
	// Reasoning tokens (part of the output tokens) of the completed
	// requests whose usage reported them: how many did, their sum and
	// mean per reporting request.
	ReasoningReporting  int     `json:"reasoning_reporting"`
	ReasoningTokens     int64   `json:"reasoning_tokens"`
	MeanReasoningTokens float64 `json:"mean_reasoning_tokens"`
	// Audio: a speech-to-text endpoint's audio (speech.go); nil for the
	// others.
	Audio *AudioStats `json:"audio,omitempty"`
}

// ItemStats are a non-generating endpoint's items: embeddings returned,
// rerank or score results, of its completed requests.
type ItemStats struct {
	Total      int64   `json:"total"`
	Throughput float64 `json:"per_s"`
}

// EndpointList is the run's endpoints in trace.Endpoints' order; its JSON
// is one object keyed by endpoint name, in that order.
type EndpointList []EndpointStats

// MarshalJSON writes {"chat": {...}, "embeddings": {...}}.
func (l EndpointList) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.Endpoint)
		v, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// endpoints fills s.Endpoints from the analyzed requests; itl holds each
// endpoint's per-event and per-token ITL statistics when the run streamed
// several generating endpoints (nil: they are the run's).
func (s *Summary) endpoints(itl map[string][2]Stats) {
	type acc struct {
		st                               EndpointStats
		lat, ttft, ttfo, tpot, rmean, fc *Dist
	}
	by := map[string]*acc{}
	ps := s.Options.Percentiles
	for i := range s.Reqs {
		q := &s.Reqs[i]
		e := by[q.Endpoint]
		if e == nil {
			lim := s.Options.MaxExactSamples
			e = &acc{st: EndpointStats{Endpoint: q.Endpoint, Generates: trace.Generates(q.Endpoint)},
				lat: newDist(lim), ttft: newDist(lim), ttfo: newDist(lim), tpot: newDist(lim), rmean: newDist(lim), fc: newDist(lim)}
			if e.st.Generates {
				e.st.Generation = &GenerationStats{ITLDefinition: s.Options.ITL.String()}
			} else {
				e.st.Items = &ItemStats{}
			}
			by[q.Endpoint] = e
		}
		st := &e.st
		st.Requests++
		switch {
		case q.ErrorKind == string(trace.ErrParentFailed):
			st.NotSent++
			continue
		case !q.Success:
			st.Failed++
			continue
		}
		st.Completed++
		st.TotalInput += int64(q.PromptTokens)
		e.lat.Add(float64(q.E2ELNs))
		if g := st.Generation; g != nil {
			g.TotalOutput += int64(q.OutputTokens)
			if q.ReasoningTokens >= 0 {
				g.ReasoningReporting++
				g.ReasoningTokens += int64(q.ReasoningTokens)
			}
			g.addAudio(q)
			if q.NonStreaming {
				continue
			}
			e.ttft.Add(float64(q.TTFTNs))
			s.reasoned = s.reasoned || q.thoughtFirst
			if q.Answered {
				e.ttfo.Add(float64(q.TTFONs))
			} else {
				g.NoAnswer++
			}
			if q.OutputTokens > 1 {
				e.tpot.Add(q.TPOTNs)
				e.rmean.Add(q.ITLMeanNs)
				if q.ContentEvents > 0 {
					e.fc.Add(q.ITLContentNs)
				}
			}
		} else {
			st.Items.Total += int64(q.Items)
		}
	}
	s.Endpoints = nil
	for _, name := range endpointOrder(by) {
		e := by[name]
		st := e.st
		st.Latency = e.lat.Stats(ps)
		if s.Duration > 0 {
			st.RequestThroughput = float64(st.Completed) / s.Duration
			st.InputThroughput = float64(st.TotalInput) / s.Duration
		}
		if g := st.Generation; g != nil {
			g.OutputThroughput = ratio(float64(g.TotalOutput), s.Duration)
			g.MeanReasoningTokens = ratio(float64(g.ReasoningTokens), float64(g.ReasoningReporting))
			g.finishAudio(s.Duration)
			g.TTFT, g.TTFO, g.TPOT = e.ttft.Stats(ps), e.ttfo.Stats(ps), e.tpot.Stats(ps)
			switch s.Options.ITL {
			case ITLRequestMean:
				g.ITL = e.rmean.Stats(ps)
			case ITLFirstContent:
				g.ITL = e.fc.Stats(ps)
			default:
				k := 0
				if s.Options.ITL == ITLPerToken {
					k = 1
				}
				if x, ok := itl[name]; ok {
					g.ITL = x[k]
				} else {
					g.ITL = [2]Stats{s.ITLPerEvent, s.ITLPerToken}[k]
				}
			}
		} else {
			st.Items.Throughput = ratio(float64(st.Items.Total), s.Duration)
		}
		s.Endpoints = append(s.Endpoints, st)
	}
}

// endpointOrder lists the endpoints seen in trace.Endpoints' order, any
// unknown name after them, sorted.
func endpointOrder[T any](by map[string]T) []string {
	var out, other []string
	for _, e := range trace.Endpoints {
		if _, ok := by[e]; ok {
			out = append(out, e)
		}
	}
	for e := range by {
		if !trace.KnownEndpoint(e) {
			other = append(other, e)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

// ShowEndpoints reports whether the reports give each endpoint its own
// section: when the run mixes endpoints, sends an API other than chat or
// completions, or reasoned (reasoning tokens reported, or a completed
// stream whose tokens began before its first answer event: a role-only
// first chunk does not count). A plain chat or completions run reads as
// before.
func (s *Summary) ShowEndpoints() bool {
	if len(s.Endpoints) != 1 {
		return len(s.Endpoints) > 1
	}
	e := s.Endpoints[0]
	if e.Endpoint != trace.EndpointChat && e.Endpoint != trace.EndpointCompletions {
		return true
	}
	return s.reasoned || (e.Generation != nil && e.Generation.ReasoningTokens > 0)
}

// writeEndpoints prints one section per endpoint after a line saying what
// vLLM's block (the run's total) holds.
func (s *Summary) writeEndpoints(b *bufio.Writer) {
	var parts []string
	for _, e := range s.Endpoints {
		parts = append(parts, fmt.Sprintf("%s %d", e.Endpoint, e.Requests))
	}
	fmt.Fprintf(b, "%-40s %s (the block above is their total; its TTFT, TPOT and ITL take the generating APIs' streams only)\n",
		"Requests by endpoint:", strings.Join(parts, ", "))
	for _, e := range s.Endpoints {
		kind := "generating"
		if !e.Generates {
			kind = "non-generating"
		}
		fmt.Fprintln(b, center(" Endpoint: "+e.Endpoint+" ("+kind+") ", '-', 50))
		fmt.Fprintf(b, "%-40s %d / %d\n", "Successful / failed requests:", e.Completed, e.Failed)
		if e.NotSent > 0 {
			fmt.Fprintf(b, "%-40s %d\n", "Not sent (parent_failed):", e.NotSent)
		}
		fmt.Fprintf(b, "%-40s %.2f\n", "Request throughput (req/s):", e.RequestThroughput)
		fmt.Fprintf(b, "%-40s %d\n", "Total input tokens:", e.TotalInput)
		fmt.Fprintf(b, "%-40s %.2f\n", "Input token throughput (tok/s):", e.InputThroughput)
		if it := e.Items; it != nil {
			fmt.Fprintf(b, "%-40s %d\n", "Items (embeddings or results):", it.Total)
			fmt.Fprintf(b, "%-40s %.2f\n", "Item throughput (items/s):", it.Throughput)
			s.statsHeader(b, "metric (ms)")
			statsRow(b, "latency (done - start)", e.Latency)
			continue
		}
		g := e.Generation
		fmt.Fprintf(b, "%-40s %d\n", "Total generated tokens:", g.TotalOutput)
		fmt.Fprintf(b, "%-40s %.2f\n", "Output token throughput (tok/s):", g.OutputThroughput)
		if g.ReasoningReporting > 0 {
			fmt.Fprintf(b, "%-40s %d in %d reporting requests (%.2f per request)\n", "Reasoning tokens:",
				g.ReasoningTokens, g.ReasoningReporting, g.MeanReasoningTokens)
		} else {
			fmt.Fprintf(b, "%-40s not reported\n", "Reasoning tokens:")
		}
		if g.NoAnswer > 0 {
			fmt.Fprintf(b, "%-40s %d (reasoning only: no TTFO)\n", "Streams without an answer token:", g.NoAnswer)
		}
		if a := g.Audio; a != nil {
			fmt.Fprintf(b, "%-40s %.2f (mean clip %.2f s)\n", "Audio transcribed (s):", a.Seconds, a.MeanClip)
			fmt.Fprintf(b, "%-40s %.2f\n", "Audio throughput (audio s / wall s):", a.PerSecond)
		}
		s.statsHeader(b, "metric (ms)")
		statsRow(b, "TTFT (first output, any kind)", g.TTFT)
		statsRow(b, "TTFO (first answer token)", g.TTFO)
		statsRow(b, "TPOT", g.TPOT)
		statsRow(b, "ITL ("+g.ITLDefinition+")", g.ITL)
		statsRow(b, "E2EL", e.Latency)
	}
}

// writeEndpointsHTML writes a section per endpoint (ShowEndpoints): a
// table of its figures and one of its latency statistics. The page's
// charts stay those of the generating part.
func (s *Summary) writeEndpointsHTML(b *strings.Builder) {
	if !s.ShowEndpoints() {
		return
	}
	for _, e := range s.Endpoints {
		kind := "generating"
		if !e.Generates {
			kind = "non-generating"
		}
		fmt.Fprintf(b, "<h2 id=\"endpoint-%s\">Endpoint: %s (%s)</h2>\n<table class=\"endpoint\">\n",
			html.EscapeString(e.Endpoint), html.EscapeString(e.Endpoint), kind)
		row := func(k, v string) {
			fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>\n", html.EscapeString(k), html.EscapeString(v))
		}
		row("successful / failed requests", fmt.Sprintf("%d / %d", e.Completed, e.Failed))
		row("request throughput (req/s)", fmt.Sprintf("%.2f", e.RequestThroughput))
		row("input token throughput (tok/s)", fmt.Sprintf("%.2f", e.InputThroughput))
		stats := []struct {
			name string
			st   Stats
		}{{"latency (done - start)", e.Latency}}
		if it := e.Items; it != nil {
			row("items (embeddings or results)", fmt.Sprint(it.Total))
			row("item throughput (items/s)", fmt.Sprintf("%.2f", it.Throughput))
		} else {
			g := e.Generation
			row("output token throughput (tok/s)", fmt.Sprintf("%.2f", g.OutputThroughput))
			if g.ReasoningReporting > 0 {
				row("reasoning tokens per request", fmt.Sprintf("%.2f (%d requests reporting)", g.MeanReasoningTokens, g.ReasoningReporting))
			} else {
				row("reasoning tokens", "not reported")
			}
			if g.NoAnswer > 0 {
				row("streams without an answer token", fmt.Sprint(g.NoAnswer))
			}
			if a := g.Audio; a != nil {
				row("audio transcribed (s)", fmt.Sprintf("%.2f (mean clip %.2f s)", a.Seconds, a.MeanClip))
				row("audio throughput (audio s / wall s)", fmt.Sprintf("%.2f", a.PerSecond))
			}
			stats = []struct {
				name string
				st   Stats
			}{{"TTFT (first output, any kind)", g.TTFT}, {"TTFO (first answer token)", g.TTFO}, {"TPOT", g.TPOT},
				{"ITL (" + g.ITLDefinition + ")", g.ITL}, {"E2EL", e.Latency}}
		}
		b.WriteString("</table>\n<table class=\"endpoint\"><tr><th>metric (ms)</th><th>count</th><th>mean</th><th>median</th>")
		for _, p := range s.Options.Percentiles {
			fmt.Fprintf(b, "<th>P%s</th>", pWord(p))
		}
		b.WriteString("</tr>\n")
		for _, m := range stats {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%.2f</td><td>%.2f</td>", html.EscapeString(m.name), m.st.Count, m.st.Mean, m.st.Median)
			for _, p := range m.st.Percentiles {
				fmt.Fprintf(b, "<td>%.2f</td>", p.Value)
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
}

// generates reports whether the run sent a generating API (or nothing at
// all): whether TTFT, TPOT and ITL mean anything.
func (s *Summary) generates() bool {
	for _, e := range s.Endpoints {
		if e.Generates {
			return true
		}
	}
	return len(s.Endpoints) == 0
}
