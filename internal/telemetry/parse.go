package telemetry

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tracekit/tracekit/trace"
)

// page is the parsed form of one scrape: rows[0] is left for the status
// row, the samples follow. Its slices are reused from scrape to scrape.
type page struct {
	rows   []trace.MetricSample
	labels []trace.Label // backing store of the rows' Labels
	fams   []*dto.MetricFamily
}

// parse decodes body by the Content-Type in h (the text format when it
// names none this parser knows) into p.rows[1:]. Families are sorted by
// name; within a family, series and buckets keep their exposition order.
// Exposition timestamps are ignored: a sample is attributed to its scrape.
func (p *page) parse(body []byte, h http.Header) error {
	p.rows = append(p.rows[:0], trace.MetricSample{})
	p.labels = p.labels[:0]
	p.fams = p.fams[:0]
	format := expfmt.ResponseFormat(h)
	what := "text exposition"
	switch format.FormatType() {
	case expfmt.TypeUnknown:
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	case expfmt.TypeOpenMetrics:
		what = "OpenMetrics exposition"
	case expfmt.TypeProtoDelim:
		what = "protobuf exposition"
	}
	dec := expfmt.NewDecoder(bytes.NewReader(body), format)
	for {
		mf := new(dto.MetricFamily)
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// expfmt.ParseError names the line ("... in line 12: ...").
			return fmt.Errorf("parsing the %s: %w", what, err)
		}
		p.fams = append(p.fams, mf)
	}
	slices.SortFunc(p.fams, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, mf := range p.fams {
		p.family(mf)
	}
	clear(p.fams) // drop the families for the GC; the rows hold their strings
	return nil
}

// family appends the rows of one metric family.
func (p *page) family(mf *dto.MetricFamily) {
	name := mf.GetName()
	typ := typeName(mf.GetType())
	for _, m := range mf.GetMetric() {
		// The series' own labels, sorted, in the backing store; le and
		// quantile rows copy them with their extra label inserted.
		start := len(p.labels)
		for _, l := range m.GetLabel() {
			p.labels = append(p.labels, trace.Label{Name: l.GetName(), Value: l.GetValue()})
		}
		own := p.labels[start:len(p.labels):len(p.labels)]
		slices.SortFunc(own, func(a, b trace.Label) int { return cmp.Compare(a.Name, b.Name) })
		add := func(sample string, labels []trace.Label, v float64) {
			p.rows = append(p.rows, trace.MetricSample{Name: sample, Family: name, Type: typ, Labels: labels, Value: v})
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			add(name, own, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			add(name, own, m.GetGauge().GetValue())
		case dto.MetricType_SUMMARY:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				add(name, p.with(own, "quantile", q.GetQuantile()), q.GetValue())
			}
			add(name+"_sum", own, s.GetSampleSum())
			add(name+"_count", own, float64(s.GetSampleCount()))
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				inf = inf || math.IsInf(b.GetUpperBound(), 1)
				add(name+"_bucket", p.with(own, "le", b.GetUpperBound()), countOf(b.GetCumulativeCount(), b.GetCumulativeCountFloat()))
			}
			count := countOf(h.GetSampleCount(), h.GetSampleCountFloat())
			if !inf && len(h.GetBucket()) > 0 {
				// The text formats always carry +Inf; protobuf may leave it
				// implicit: it equals the count.
				add(name+"_bucket", p.with(own, "le", math.Inf(1)), count)
			}
			sum, cnt := "_sum", "_count"
			if mf.GetType() == dto.MetricType_GAUGE_HISTOGRAM {
				sum, cnt = "_gsum", "_gcount"
			}
			add(name+sum, own, h.GetSampleSum())
			add(name+cnt, own, count)
		default:
			add(name, own, m.GetUntyped().GetValue())
		}
	}
}

// with returns own plus {name: FormatBound(v)} in sorted position, in the
// backing store.
func (p *page) with(own []trace.Label, name string, v float64) []trace.Label {
	start := len(p.labels)
	i, _ := slices.BinarySearchFunc(own, name, func(l trace.Label, n string) int { return strings.Compare(l.Name, n) })
	p.labels = append(p.labels, own[:i]...)
	p.labels = append(p.labels, trace.Label{Name: name, Value: FormatBound(v)})
	p.labels = append(p.labels, own[i:]...)
	return p.labels[start:len(p.labels):len(p.labels)]
}

// FormatBound writes an le or quantile value as the sidecar stores it: Go's
// shortest representation ("0.005", "1", "+Inf").
func FormatBound(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// ParseBound reads an le or quantile label value ("+Inf" included).
func ParseBound(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bound %q is not a number: %w", s, err)
	}
	return v, nil
}

func countOf(u uint64, f float64) float64 {
	if f != 0 {
		return f
	}
	return float64(u)
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return trace.MetricCounter
	case dto.MetricType_GAUGE:
		return trace.MetricGauge
	case dto.MetricType_HISTOGRAM:
		return trace.MetricHistogram
	case dto.MetricType_GAUGE_HISTOGRAM:
		return trace.MetricGaugeHistogram
	case dto.MetricType_SUMMARY:
		return trace.MetricSummary
	}
	return trace.MetricUntyped
}
