package live

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"
)

// DefaultWindow is the span of the rolling figures.
const DefaultWindow = 10 * time.Second

// slots is how many parts the window is cut into.
const slots = 10

// Counts are the run's own counters so far (replay.Stats).
type Counts struct {
	Total, Sent, Done, Failed, InFlight int64
	Elapsed                             time.Duration // run clock now
}

// Health is the client's health so far: how late requests left, how long
// goroutines waited to run, how busy the process is.
type Health struct {
	DispatchLagP50Ns, DispatchLagP99Ns, DispatchLagMaxNs int64
	SchedLatP99Ns                                        int64
	CPUSeconds                                           float64 // since the run started, all cores
	Cores                                                int
}

// Gauge is one named figure of the server's side (a scrape endpoint's
// counts, a metric's latest value).
type Gauge struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Note  string  `json:"note,omitempty"`
}

// Sources are polled when a Snapshot is taken. Counts is required; the
// others may be nil.
type Sources struct {
	Counts func() Counts
	Health func() Health
	Server func() []Gauge
}

// Percentiles summarize one latency over the window, in ns.
type Percentiles struct {
	N             int64 `json:"n"`
	P50, P90, P99 int64 `json:"-"`
	// Milliseconds, for the page.
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Snapshot is the view at one instant.
type Snapshot struct {
	Label   string        `json:"label"`
	Window  time.Duration `json:"-"`
	WindowS float64       `json:"window_s"`
	// Counters since the run started (Sources.Counts).
	ElapsedS float64 `json:"elapsed_s"`
	Total    int64   `json:"total"`
	Sent     int64   `json:"sent"`
	Done     int64   `json:"done"`
	InFlight int64   `json:"in_flight"`
	Failed   int64   `json:"failed"`
	// FailedByKind counts the failed records the view received, by
	// error_kind, since the run started.
	FailedByKind map[string]int64 `json:"failed_by_kind"`
	// Over the window.
	WindowDone    int64       `json:"window_done"`
	WindowFailed  int64       `json:"window_failed"`
	TTFT          Percentiles `json:"ttft"`
	ITL           Percentiles `json:"itl"`
	E2EL          Percentiles `json:"e2el"`
	RequestsPerS  float64     `json:"requests_per_s"`
	OutputTokPerS float64     `json:"output_tokens_per_s"`
	Health        HealthView  `json:"health"`
	Server        []Gauge     `json:"server,omitempty"`
	Dropped       int64       `json:"dropped"` // samples the feed could not take
	Finished      bool        `json:"finished"`
}

// HealthView is Health as shown: lag and latency in ms, CPU as the share
// of one core busy since the run started.
type HealthView struct {
	DispatchLagP50Ms float64 `json:"dispatch_lag_p50_ms"`
	DispatchLagP99Ms float64 `json:"dispatch_lag_p99_ms"`
	DispatchLagMaxMs float64 `json:"dispatch_lag_max_ms"`
	SchedLatP99Ms    float64 `json:"sched_lat_p99_ms"`
	CPUPercent       float64 `json:"cpu_percent"` // 100 = one core
	Cores            int     `json:"cores"`
}

// View keeps the rolling figures fed by a Feed. Run consumes the feed;
// Snapshot may be called from any goroutine.
type View struct {
	label  string
	feed   *Feed
	src    Sources
	window time.Duration
	slotNs int64

	mu       sync.Mutex
	ring     [slots]slot
	byKind   map[string]int64
	finished bool
}

// slot holds the samples whose request ended in [id*slotNs, (id+1)*slotNs).
type slot struct {
	id                 int64 // -1: empty
	done, failed, toks int64
	ttft, itl, e2el    hist
}

// Options configure a View.
type Options struct {
	Label  string        // what runs ("replay run.parquet", "sweep step 3")
	Window time.Duration // default DefaultWindow
}

// NewView makes a view of feed and src.
func NewView(feed *Feed, src Sources, o Options) *View {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	v := &View{label: o.Label, feed: feed, src: src, window: o.Window,
		slotNs: max(1, int64(o.Window)/slots), byKind: map[string]int64{}}
	for i := range v.ring {
		v.ring[i].id = -1
	}
	return v
}

// Run takes samples from the feed until ctx ends. It is the feed's only
// reader; start it once.
func (v *View) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-v.feed.ch:
			v.Add(s)
		}
	}
}

// Finish marks the run over (the page says so) after taking what is left
// in the feed.
func (v *View) Finish() {
	for {
		select {
		case s := <-v.feed.ch:
			v.Add(s)
			continue
		default:
		}
		break
	}
	v.mu.Lock()
	v.finished = true
	v.mu.Unlock()
}

// Add counts one sample (Run calls it; tests may too).
func (v *View) Add(s Sample) {
	id := s.DoneNs / v.slotNs
	v.mu.Lock()
	defer v.mu.Unlock()
	if s.ErrorKind != "" {
		v.byKind[s.ErrorKind]++
	}
	sl := &v.ring[id%slots]
	if sl.id != id {
		if sl.id > id {
			return // older than the window: counted in the totals only
		}
		*sl = slot{id: id}
	}
	sl.done++
	if s.ErrorKind != "" {
		sl.failed++
		return
	}
	sl.toks += s.OutputTokens
	if s.TTFTNs > 0 {
		sl.ttft.add(s.TTFTNs)
	}
	for _, g := range s.ITLNs {
		sl.itl.add(g)
	}
	if s.E2ELNs > 0 {
		sl.e2el.add(s.E2ELNs)
	}
}

// Snapshot polls the sources and returns the figures of the window that
// ends now on the run clock (Counts.Elapsed).
func (v *View) Snapshot() Snapshot {
	var c Counts
	if v.src.Counts != nil {
		c = v.src.Counts()
	}
	s := Snapshot{Label: v.label, Window: v.window, WindowS: v.window.Seconds(), ElapsedS: c.Elapsed.Seconds(),
		Total: c.Total, Sent: c.Sent, Done: c.Done, InFlight: c.InFlight, Failed: c.Failed}
	if v.src.Health != nil {
		h := v.src.Health()
		s.Health = HealthView{DispatchLagP50Ms: ms(h.DispatchLagP50Ns), DispatchLagP99Ms: ms(h.DispatchLagP99Ns),
			DispatchLagMaxMs: ms(h.DispatchLagMaxNs), SchedLatP99Ms: ms(h.SchedLatP99Ns), Cores: h.Cores}
		if c.Elapsed > 0 {
			s.Health.CPUPercent = 100 * h.CPUSeconds / c.Elapsed.Seconds()
		}
	}
	if v.src.Server != nil {
		s.Server = v.src.Server()
	}
	s.Dropped = v.feed.Dropped()

	now := int64(c.Elapsed)
	cur := now / v.slotNs
	var ttft, itl, e2el hist
	var toks int64
	v.mu.Lock()
	s.FailedByKind = make(map[string]int64, len(v.byKind))
	for k, n := range v.byKind {
		s.FailedByKind[k] = n
	}
	s.Finished = v.finished
	for i := range v.ring {
		sl := &v.ring[i]
		if sl.id < 0 || sl.id <= cur-slots || sl.id > cur {
			continue
		}
		s.WindowDone += sl.done
		s.WindowFailed += sl.failed
		toks += sl.toks
		ttft.merge(&sl.ttft)
		itl.merge(&sl.itl)
		e2el.merge(&sl.e2el)
	}
	v.mu.Unlock()
	s.TTFT, s.ITL, s.E2EL = ttft.percentiles(), itl.percentiles(), e2el.percentiles()
	// The window covers the current slot up to now and the 9 before it,
	// or the whole run when it is younger.
	span := float64(now-(cur-slots+1)*v.slotNs) / 1e9
	if run := c.Elapsed.Seconds(); run < span {
		span = run
	}
	if span > 0 {
		s.RequestsPerS = float64(s.WindowDone) / span
		s.OutputTokPerS = float64(toks) / span
	}
	return s
}

// Kinds returns the failure kinds of s in a stable order.
func (s Snapshot) Kinds() []string {
	ks := make([]string, 0, len(s.FailedByKind))
	for k := range s.FailedByKind {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// hist is a log-bucketed histogram: bucket i holds values in
// [base^i, base^(i+1)) ns, base 1.02, from 1 ns to about 10^13 ns.
type hist struct {
	counts map[int32]int64
	n      int64
}

var logBase = math.Log(1.02)

func bucketOf(v int64) int32 {
	if v < 1 {
		v = 1
	}
	return int32(math.Log(float64(v)) / logBase)
}

// middle is the geometric middle of bucket i.
func middle(i int32) int64 {
	return int64(math.Round(math.Exp((float64(i) + 0.5) * logBase)))
}

func (h *hist) add(v int64) {
	if h.counts == nil {
		h.counts = map[int32]int64{}
	}
	h.counts[bucketOf(v)]++
	h.n++
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make(map[int32]int64, len(o.counts))
	}
	for b, n := range o.counts {
		h.counts[b] += n
	}
	h.n += o.n
}

// percentiles are the nearest-rank p50, p90 and p99: the value of rank
// ceil(p*n) in sorted order, as its bucket's middle.
func (h *hist) percentiles() Percentiles {
	p := Percentiles{N: h.n}
	if h.n == 0 {
		return p
	}
	bs := make([]int32, 0, len(h.counts))
	for b := range h.counts {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i] < bs[j] })
	at := func(q float64) int64 {
		rank := int64(math.Ceil(q * float64(h.n)))
		var seen int64
		for _, b := range bs {
			seen += h.counts[b]
			if seen >= rank {
				return middle(b)
			}
		}
		return middle(bs[len(bs)-1])
	}
	p.P50, p.P90, p.P99 = at(0.5), at(0.9), at(0.99)
	p.P50Ms, p.P90Ms, p.P99Ms = ms(p.P50), ms(p.P90), ms(p.P99)
	return p
}
