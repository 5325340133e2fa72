package analyze

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// timeSlices is how many equal slices the report's time-slice table and
// interactivity chart cut a run into.
const timeSlices = 10

// TimeSlice is one slice of the run by end time: the requests that ended
// in [FromS, ToS) seconds from the run start.
type TimeSlice struct {
	FromS, ToS        float64
	Completed, Failed int
	OutputPerS        float64 // output tokens of the completed requests, per second of the slice
	TTFTp50, E2ELp50  float64 // ms, NaN when none
	PerUserP50        float64 // tokens/s per user (1 / TPOT), NaN when none
}

// slicesOf cuts the run into n slices of equal length by request end.
func (s *Summary) slicesOf(n int) []TimeSlice {
	span := float64(s.EndNs-s.StartNs) / 1e9
	if span <= 0 || len(s.Reqs) == 0 {
		return nil
	}
	out := make([]TimeSlice, n)
	ttft, e2el, user := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for i := range out {
		out[i].FromS, out[i].ToS = float64(s.StartNs)/1e9+span*float64(i)/float64(n), float64(s.StartNs)/1e9+span*float64(i+1)/float64(n)
	}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if !q.Success && q.SentNs == 0 {
			continue // never sent
		}
		k := min(max(int(float64(q.endNs()-s.StartNs)/1e9/span*float64(n)), 0), n-1)
		if !q.Success {
			out[k].Failed++
			continue
		}
		out[k].Completed++
		out[k].OutputPerS += float64(q.OutputTokens)
		e2el[k] = append(e2el[k], float64(q.E2ELNs)/1e6)
		if !q.NonStreaming {
			ttft[k] = append(ttft[k], float64(q.TTFTNs)/1e6)
		}
		if q.TPOTNs > 0 {
			user[k] = append(user[k], 1e9/q.TPOTNs)
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for i := range out {
		out[i].OutputPerS /= span / float64(n)
		out[i].TTFTp50, out[i].E2ELp50, out[i].PerUserP50 = med(ttft[i]), med(e2el[i]), med(user[i])
	}
	return out
}

// writeTimeSlicesHTML writes the time-slice table: whether the run held
// steady shows as rows that agree.
func (s *Summary) writeTimeSlicesHTML(b *strings.Builder) {
	sl := s.slicesOf(timeSlices)
	if sl == nil {
		return
	}
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	gen := s.generates() // embeddings, rerank or score only: no stream, no TTFT or per-user rate
	b.WriteString("<h2>Time slices (requests by end time)</h2>\n<table class=\"slices\" id=\"time-slices\"><tr><th>from (s)</th><th>to (s)</th><th>completed</th><th>failed</th><th>output tok/s</th>")
	if gen {
		b.WriteString("<th>median TTFT ms</th>")
	}
	b.WriteString("<th>median E2EL ms</th>")
	if gen {
		b.WriteString("<th>median tok/s per user</th>")
	}
	b.WriteString("</tr>\n")
	for _, x := range sl {
		cls := ""
		if x.Failed > 0 {
			cls = ` class="bad"`
		}
		fmt.Fprintf(b, "<tr%s><td>%.1f</td><td>%.1f</td><td>%d</td><td>%d</td><td>%.1f</td>", cls, x.FromS, x.ToS, x.Completed, x.Failed, x.OutputPerS)
		if gen {
			fmt.Fprintf(b, "<td>%s</td>", f(x.TTFTp50))
		}
		fmt.Fprintf(b, "<td>%s</td>", f(x.E2ELp50))
		if gen {
			fmt.Fprintf(b, "<td>%s</td>", f(x.PerUserP50))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

// interactivityChart is output tokens/s against tokens/s per user (the
// chart serving teams publish: what a deployment gives in total against
// what each user sees), one point per time slice with requests.
func (s *Summary) interactivityChart() chart {
	c := chart{id: "interactivity", title: "Throughput vs interactivity (one point per time slice)", xlabel: "median tokens/s per user (1 / TPOT)", ylabel: "output tokens/s",
		series: []chartSeries{{name: "time slices", color: colorA}}}
	for _, x := range s.slicesOf(timeSlices) {
		if !math.IsNaN(x.PerUserP50) {
			c.series[0].pts = append(c.series[0].pts, [2]float64{x.PerUserP50, x.OutputPerS})
		}
	}
	c.scatter = true
	return c
}

// lengthHistogram is the distribution of a token count as a step outline
// over about 20 bins.
func (s *Summary) lengthHistogram(id, title, xlabel string, color string, of func(*Request) int32) chart {
	c := chart{id: id, title: title, xlabel: xlabel, ylabel: "requests", series: []chartSeries{{name: "requests", color: color}}}
	var v []float64
	for i := range s.Reqs {
		if q := &s.Reqs[i]; q.Success {
			v = append(v, float64(of(q)))
		}
	}
	if len(v) == 0 {
		return c
	}
	lo, hi := slices.Min(v), slices.Max(v)
	w := max(1, math.Ceil((hi-lo+1)/20))
	n := int((hi-lo)/w) + 1
	counts := make([]float64, n)
	for _, x := range v {
		counts[int((x-lo)/w)]++
	}
	pts := [][2]float64{{lo, 0}}
	for i, k := range counts {
		a := lo + float64(i)*w
		pts = append(pts, [2]float64{a, k}, [2]float64{a + w, k})
	}
	c.series[0].pts = append(pts, [2]float64{lo + float64(n)*w, 0})
	return c
}
