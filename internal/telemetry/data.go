package telemetry

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// Point is one sample of a series: when (TimeNs of its scrape, run clock)
// and what.
type Point struct {
	TimeNs int64
	Value  float64
}

// Series is one time series of one target: a sample name and label set,
// its points in time order.
type Series struct {
	Target string
	Name   string
	Family string
	Type   string
	Labels []trace.Label // sorted by name
	Points []Point
}

// Label returns the value of label name, "" when the series has none.
func (s *Series) Label(name string) string {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// Scrape is one status row: one request to one endpoint.
type Scrape struct {
	Target         string
	TimeNs         int64
	SentNs, ReadNs int64
	OK             bool
	Status         int32
	ErrorKind      string
	ErrorMessage   string
}

// Data is a sidecar in memory, arranged by series.
type Data struct {
	Meta    trace.MetricsMeta
	Series  []*Series // sorted by target, name, labels
	Scrapes []Scrape  // in time order

	byName map[[2]string][]*Series // (target, name)
}

// Read reads a sidecar (see trace.MetricsPath) into Data.
func Read(path string) (*Data, error) {
	r, err := trace.OpenMetricsFile(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := newBuilder(r.Meta)
	batch := make([]trace.MetricSample, trace.RowGroupRows)
	for n := int64(0); ; {
		k, err := r.Read(batch)
		for i := range k {
			b.add(&batch[i]) // copies the labels: the reader reuses them
		}
		n += int64(k)
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w (after row %d)", err, n)
		}
	}
	return b.done(), nil
}

// NewData arranges rows (as a Sink received them, or as read) into Data.
func NewData(meta trace.MetricsMeta, rows []trace.MetricSample) *Data {
	b := newBuilder(meta)
	for i := range rows {
		b.add(&rows[i])
	}
	return b.done()
}

type builder struct {
	d     *Data
	index map[string]*Series
	key   strings.Builder
}

func newBuilder(meta trace.MetricsMeta) *builder {
	return &builder{d: &Data{Meta: meta}, index: map[string]*Series{}}
}

func (b *builder) add(r *trace.MetricSample) {
	if r.Type == trace.MetricScrape {
		b.d.Scrapes = append(b.d.Scrapes, Scrape{Target: r.Target, TimeNs: r.TimeNs, SentNs: r.SentNs, ReadNs: r.ReadNs,
			OK: r.ErrorKind == trace.ScrapeOK, Status: r.Status, ErrorKind: r.ErrorKind, ErrorMessage: r.ErrorMessage})
		return
	}
	b.key.Reset()
	b.key.WriteString(r.Target)
	b.key.WriteByte(0)
	b.key.WriteString(r.Name)
	for _, l := range r.Labels {
		b.key.WriteByte(0)
		b.key.WriteString(l.Name)
		b.key.WriteByte('=')
		b.key.WriteString(l.Value)
	}
	s := b.index[b.key.String()]
	if s == nil {
		s = &Series{Target: r.Target, Name: r.Name, Family: r.Family, Type: r.Type, Labels: slices.Clone(r.Labels)}
		b.index[b.key.String()] = s
		b.d.Series = append(b.d.Series, s)
	}
	s.Points = append(s.Points, Point{r.TimeNs, r.Value})
}

func (b *builder) done() *Data {
	d := b.d
	byTime := func(a, b Point) int { return cmp.Compare(a.TimeNs, b.TimeNs) }
	for _, s := range d.Series {
		if !slices.IsSortedFunc(s.Points, byTime) {
			slices.SortStableFunc(s.Points, byTime)
		}
	}
	slices.SortFunc(d.Series, func(a, b *Series) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), strings.Compare(a.Name, b.Name),
			slices.CompareFunc(a.Labels, b.Labels, func(x, y trace.Label) int {
				return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(x.Value, y.Value))
			}))
	})
	slices.SortStableFunc(d.Scrapes, func(a, b Scrape) int { return cmp.Compare(a.TimeNs, b.TimeNs) })
	d.byName = map[[2]string][]*Series{}
	for _, s := range d.Series {
		k := [2]string{s.Target, s.Name}
		d.byName[k] = append(d.byName[k], s)
	}
	return d
}

// Targets are the endpoints that appear in the data (samples or status
// rows), sorted.
func (d *Data) Targets() []string {
	var out []string
	for _, s := range d.Scrapes {
		out = append(out, s.Target)
	}
	for _, s := range d.Series {
		out = append(out, s.Target)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Find returns the series of one sample name at target (every target when
// target is ""), each with all of match among its labels.
func (d *Data) Find(target, name string, match ...trace.Label) []*Series {
	var cands []*Series
	if target != "" {
		cands = d.byName[[2]string{target, name}]
	} else {
		for _, s := range d.Series {
			if s.Name == name {
				cands = append(cands, s)
			}
		}
	}
	if len(match) == 0 {
		return cands
	}
	var out []*Series
outer:
	for _, s := range cands {
		for _, m := range match {
			if s.Label(m.Name) != m.Value {
				continue outer
			}
		}
		out = append(out, s)
	}
	return out
}

// ScrapesOf returns target's status rows with From <= TimeNs <= To.
func (d *Data) ScrapesOf(target string, w Window) []Scrape {
	var out []Scrape
	for _, s := range d.Scrapes {
		if s.Target == target && s.TimeNs >= w.From && s.TimeNs <= w.To {
			out = append(out, s)
		}
	}
	return out
}
