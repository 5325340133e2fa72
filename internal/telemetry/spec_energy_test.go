package telemetry

import (
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// SGLang's acceptance length is a gauge, averaged over the window; a DCGM
// exporter's energy counters add over GPUs (mJ) and its power gauges add
// per scrape, whatever server the target is (here none).
func TestSummarizeSpecGaugeAndEnergy(t *testing.T) {
	const sg, dc = "http://sglang/metrics", "http://gpu:9400/metrics"
	var rows []trace.MetricSample
	row := func(at int64, target, name, typ string, v float64, labels ...trace.Label) trace.MetricSample {
		return trace.MetricSample{TimeNs: at, Target: target, Name: name, Family: name, Type: typ, Labels: labels, Value: v}
	}
	gpu := func(i string) trace.Label { return trace.Label{Name: "gpu", Value: i} }
	for i, at := range []int64{1e9, 2e9, 3e9} {
		f := float64(i)
		rows = append(rows,
			trace.MetricSample{TimeNs: at, Target: sg, Name: trace.ScrapeRowName, Type: trace.MetricScrape, Value: 1, Status: 200},
			row(at, sg, "sglang:num_running_reqs", trace.MetricGauge, 4),
			row(at, sg, "sglang:spec_accept_length", trace.MetricGauge, 2+f), // 2, 3, 4
			row(at, sg, "sglang:spec_accept_rate", trace.MetricGauge, 0.5),
			trace.MetricSample{TimeNs: at, Target: dc, Name: trace.ScrapeRowName, Type: trace.MetricScrape, Value: 1, Status: 200},
			row(at, dc, DCGMEnergy, trace.MetricCounter, 7e9+1000*f, gpu("0")),
			row(at, dc, DCGMEnergy, trace.MetricCounter, 3e9+3000*f, gpu("1")),
			row(at, dc, DCGMPower, trace.MetricGauge, 100+10*f, gpu("0")),
			row(at, dc, DCGMPower, trace.MetricGauge, 200, gpu("1")),
		)
	}
	d := NewData(trace.MetricsMeta{IntervalNs: 1e9}, rows)
	s := SummarizeTarget(d, sg, All)
	if s.Server != "sglang" || !s.SpecAcceptLength.OK || s.SpecAcceptLength.Mean != 3 || s.Used["SpecAcceptLength"] != "sglang:spec_accept_length" {
		t.Errorf("sglang: server %q, accept length %+v", s.Server, s.SpecAcceptLength)
	}
	if !s.SpecAcceptRate.OK || s.SpecAcceptRate.Mean != 0.5 {
		t.Errorf("sglang: accept rate %+v", s.SpecAcceptRate)
	}
	if s.SpecDrafts.OK || s.EnergyMJ.OK {
		t.Errorf("sglang: drafts %+v energy %+v from metrics it lacks", s.SpecDrafts, s.EnergyMJ)
	}
	e := SummarizeTarget(d, dc, All)
	if e.Server != "" || !e.EnergyMJ.OK || e.EnergyMJ.Increase != 8000 || e.EnergyMJ.Series != 2 || !near(e.EnergyMJ.PerSecond, 4000) {
		t.Errorf("dcgm: server %q, energy %+v; want 8000 mJ over 2 s from 2 GPUs", e.Server, e.EnergyMJ)
	}
	if !e.PowerW.OK || e.PowerW.Mean != 310 || e.PowerW.Max != 320 {
		t.Errorf("dcgm: power %+v; want the GPUs' sum, mean 310 W", e.PowerW)
	}
	// Half the run: the last scrape at or before 1.5 s to the last at or before 2.5 s.
	if h := SummarizeTarget(d, dc, Window{1.5e9, 2.5e9}); h.EnergyMJ.Increase != 4000 {
		t.Errorf("dcgm over [1.5s, 2.5s]: %+v", h.EnergyMJ)
	}
}
