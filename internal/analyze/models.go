package analyze

import (
	"bufio"
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// ModelStats are one model's figures in a run that sent several (a
// router's: synth --model-mix). The model of a request is the one it named
// (trace.Record.Model), else the run's --model. Throughputs are per second
// of the run's Duration, latencies in milliseconds under the Summary's
// definitions; ITL is vLLM's per-event gap pooled over the model's streams
// (ITLDefinition says when the run was too large to keep its events and
// each request's mean gap stands in).
type ModelStats struct {
	Requests             int     `json:"requests"`
	Completed            int     `json:"completed"`
	Failed               int     `json:"failed"`
	TotalInput           int64   `json:"total_input_tokens"`
	TotalOutput          int64   `json:"total_output_tokens"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	TTFT                 Stats   `json:"ttft"`
	TPOT                 Stats   `json:"tpot"`
	ITL                  Stats   `json:"itl"`
	ITLDefinition        string  `json:"itl_definition"`
	E2EL                 Stats   `json:"e2el"`
}

// models fills Summary.Models when the analyzed requests named more than
// one model.
func (s *Summary) models() {
	byModel := map[string][]*Request{}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		byModel[q.Model] = append(byModel[q.Model], q)
	}
	if len(byModel) < 2 {
		return
	}
	s.Models = map[string]*ModelStats{}
	for name, qs := range byModel {
		s.Models[name] = s.modelStats(qs)
	}
}

func (s *Summary) modelStats(qs []*Request) *ModelStats {
	m := &ModelStats{Requests: len(qs), ITLDefinition: ITLPerEvent.String()}
	limit := s.Options.MaxExactSamples
	ttft, tpot, itl, e2el := newDist(limit), newDist(limit), newDist(limit), newDist(limit)
	perEvent := s.eventTimes != nil
	if !perEvent {
		m.ITLDefinition = ITLRequestMean.String()
	}
	for _, q := range qs {
		if !q.Success {
			if q.ErrorKind != string(trace.ErrParentFailed) && q.ErrorKind != string(trace.ErrCanceledByClient) {
				m.Failed++
			}
			continue
		}
		m.Completed++
		m.TotalInput += int64(q.PromptTokens)
		m.TotalOutput += int64(q.OutputTokens)
		e2el.Add(float64(q.E2ELNs))
		if q.NonStreaming {
			continue
		}
		ttft.Add(float64(q.TTFTNs))
		if q.OutputTokens > 1 {
			tpot.Add(q.TPOTNs)
		}
		switch {
		case perEvent:
			ev := s.eventTimes[q.evOff : q.evOff+int(q.Events)]
			for i := 1; i < len(ev); i++ {
				itl.Add(float64(ev[i] - ev[i-1]))
			}
		case q.OutputTokens > 1:
			itl.Add(q.ITLMeanNs)
		}
	}
	if s.Duration > 0 {
		m.RequestThroughput = float64(m.Completed) / s.Duration
		m.OutputThroughput = float64(m.TotalOutput) / s.Duration
		m.TotalTokenThroughput = float64(m.TotalInput+m.TotalOutput) / s.Duration
	}
	ps := s.Options.Percentiles
	m.TTFT, m.TPOT, m.ITL, m.E2EL = ttft.Stats(ps), tpot.Stats(ps), itl.Stats(ps), e2el.Stats(ps)
	return m
}

// modelNames are Summary.Models' keys in order.
func (s *Summary) modelNames() []string {
	names := make([]string, 0, len(s.Models))
	for n := range s.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (m *ModelStats) latencies() []struct {
	name string
	st   Stats
} {
	return []struct {
		name string
		st   Stats
	}{{"TTFT", m.TTFT}, {"TPOT", m.TPOT}, {"ITL (" + m.ITLDefinition + ")", m.ITL}, {"E2EL", m.E2EL}}
}

// writeModels prints each model's section.
func (s *Summary) writeModels(b *bufio.Writer) {
	for _, name := range s.modelNames() {
		m := s.Models[name]
		fmt.Fprintln(b, center(" Model: "+name+" ", '-', 50))
		fmt.Fprintf(b, "%-40s %d / %d\n", "Successful / failed requests:", m.Completed, m.Failed)
		fmt.Fprintf(b, "%-40s %.2f\n", "Request throughput (req/s):", m.RequestThroughput)
		fmt.Fprintf(b, "%-40s %.2f\n", "Output token throughput (tok/s):", m.OutputThroughput)
		fmt.Fprintf(b, "%-40s %.2f\n", "Total token throughput (tok/s):", m.TotalTokenThroughput)
		s.statsHeader(b, "metric (ms)")
		for _, l := range m.latencies() {
			statsRow(b, l.name, l.st)
		}
	}
}

// writeModelsHTML is writeModels for the HTML report.
func (s *Summary) writeModelsHTML(b *strings.Builder) {
	for _, name := range s.modelNames() {
		m := s.Models[name]
		fmt.Fprintf(b, "<h2>Model: %s</h2>\n<table class=\"endpoint\">\n", html.EscapeString(name))
		row := func(k, v string) {
			fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>\n", html.EscapeString(k), html.EscapeString(v))
		}
		row("successful / failed requests", fmt.Sprintf("%d / %d", m.Completed, m.Failed))
		row("request throughput (req/s)", fmt.Sprintf("%.2f", m.RequestThroughput))
		row("output token throughput (tok/s)", fmt.Sprintf("%.2f", m.OutputThroughput))
		row("total token throughput (tok/s)", fmt.Sprintf("%.2f", m.TotalTokenThroughput))
		b.WriteString("</table>\n<table class=\"endpoint\"><tr><th>metric (ms)</th><th>count</th><th>mean</th><th>median</th>")
		for _, p := range s.Options.Percentiles {
			fmt.Fprintf(b, "<th>P%s</th>", pWord(p))
		}
		b.WriteString("</tr>\n")
		for _, l := range m.latencies() {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%.2f</td><td>%.2f</td>", html.EscapeString(l.name), l.st.Count, l.st.Mean, l.st.Median)
			for _, p := range l.st.Percentiles {
				fmt.Fprintf(b, "<td>%.2f</td>", p.Value)
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
}
