package telemetry

import "math"

// Summary is what one target's server reported over a window, under the
// names of the server Detect recognised. A field whose metric the server
// does not export, or that has too few samples in the window, has OK
// false.
type Summary struct {
	Target string
	Server string // Names.Server, "" when none was recognised
	Window Window

	Scrapes      int            // status rows in the window
	Failed       int            // of which failed
	FailedByKind map[string]int // error kind -> count

	Running, Waiting GaugeStat
	KVCacheUsage     GaugeStat // fraction 0..1

	Preemptions, PromptTokens, GenerationTokens, Requests CounterStat
	PrefixQueries, PrefixHits                             CounterStat
	// PrefixHitRate is PrefixHits.Increase / PrefixQueries.Increase over
	// the window (tokens found / tokens looked up); OK when both counters
	// are and some tokens were looked up.
	PrefixHitRate   float64
	PrefixHitRateOK bool

	// Speculative decoding: draft steps, draft tokens proposed and of them
	// accepted (counters), and a server's own mean acceptance length
	// (gauge, SGLang).
	SpecDrafts, SpecDraftTokens, SpecAccepted CounterStat
	SpecAcceptLength, SpecAcceptRate          GaugeStat

	// Energy (DCGM): the GPUs' energy counters summed, in mJ (Series is
	// the number of GPUs), and their power draw summed per scrape, in W.
	EnergyMJ CounterStat
	PowerW   GaugeStat

	// Server-side latency distributions over the window, in seconds.
	TTFT, ITL, TPOT, E2E, QueueTime HistogramStat

	// Used maps each reported field to the metric name it came from.
	Used map[string]string
}

// TokensPerSecond is the server's generation throughput over the window.
func (s Summary) TokensPerSecond() float64 { return s.GenerationTokens.PerSecond }

// Summarize summarises every target in d over w, in Targets order.
func Summarize(d *Data, w Window) []Summary {
	var out []Summary
	for _, t := range d.Targets() {
		out = append(out, SummarizeTarget(d, t, w))
	}
	return out
}

// SummarizeTarget summarises one target over w.
func SummarizeTarget(d *Data, target string, w Window) Summary {
	s := Summary{Target: target, Window: w, FailedByKind: map[string]int{}, Used: map[string]string{},
		PrefixHitRate: math.NaN()}
	for _, sc := range d.ScrapesOf(target, w) {
		s.Scrapes++
		if !sc.OK {
			s.Failed++
			s.FailedByKind[sc.ErrorKind]++
		}
	}
	if ss := d.Find(target, DCGMEnergy); len(ss) > 0 {
		s.EnergyMJ, s.Used["EnergyMJ"] = SumCounters(ss, w), DCGMEnergy
	}
	if ss := d.Find(target, DCGMPower); len(ss) > 0 {
		s.PowerW, s.Used["PowerW"] = Gauge(Combine(ss, AggSum), w), DCGMPower
	}
	n, ok := d.Detect(target)
	if !ok {
		return s
	}
	s.Server = n.Server
	pick := func(field string, names []string, suffix string) (string, []*Series) {
		for _, name := range names {
			if ss := d.Find(target, name+suffix); len(ss) > 0 {
				s.Used[field] = name
				return name, ss
			}
		}
		return "", nil
	}
	gauge := func(field string, names []string, agg Agg) GaugeStat {
		if _, ss := pick(field, names, ""); ss != nil {
			return Gauge(Combine(ss, agg), w)
		}
		return GaugeStat{}
	}
	counter := func(field string, names []string) CounterStat {
		if _, ss := pick(field, names, ""); ss != nil {
			return SumCounters(ss, w)
		}
		return CounterStat{}
	}
	hist := func(field string, names []string) HistogramStat {
		if name, ss := pick(field, names, "_bucket"); ss != nil {
			return d.Histogram(target, name, w)
		}
		return HistogramStat{Mean: math.NaN()}
	}
	s.Running = gauge("Running", n.Running, AggSum)
	s.Waiting = gauge("Waiting", n.Waiting, AggSum)
	s.KVCacheUsage = gauge("KVCacheUsage", n.KVCacheUsage, AggMean)
	s.Preemptions = counter("Preemptions", n.Preemptions)
	s.PromptTokens = counter("PromptTokens", n.PromptTokens)
	s.GenerationTokens = counter("GenerationTokens", n.GenerationTokens)
	s.Requests = counter("Requests", n.Requests)
	s.PrefixQueries = counter("PrefixQueries", n.PrefixQueries)
	s.PrefixHits = counter("PrefixHits", n.PrefixHits)
	if s.PrefixQueries.OK && s.PrefixHits.OK && s.PrefixQueries.Increase > 0 {
		s.PrefixHitRate, s.PrefixHitRateOK = s.PrefixHits.Increase/s.PrefixQueries.Increase, true
	}
	s.SpecDrafts = counter("SpecDrafts", n.SpecDrafts)
	s.SpecDraftTokens = counter("SpecDraftTokens", n.SpecDraftTokens)
	s.SpecAccepted = counter("SpecAccepted", n.SpecAccepted)
	s.SpecAcceptLength = gauge("SpecAcceptLength", n.SpecAcceptLength, AggMean)
	s.SpecAcceptRate = gauge("SpecAcceptRate", n.SpecAcceptRate, AggMean)
	s.TTFT = hist("TTFT", n.TTFT)
	s.ITL = hist("ITL", n.ITL)
	s.TPOT = hist("TPOT", n.TPOT)
	s.E2E = hist("E2E", n.E2E)
	s.QueueTime = hist("QueueTime", n.QueueTime)
	return s
}
