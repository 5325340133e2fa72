package main

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// fakeDCGM serves dcgm-exporter's exposition for two GPUs whose energy
// counters (mJ since boot) grow by a fixed amount at every scrape, and
// whose power gauges are constant.
type fakeDCGM struct {
	mu      sync.Mutex
	scrapes int
}

var (
	dcgmStartMJ = [2]float64{9.1e9, 4.2e9}
	dcgmStepMJ  = [2]float64{1500, 2500} // per scrape
	dcgmPowerW  = [2]float64{300, 200}
)

func (f *fakeDCGM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := f.scrapes
	f.scrapes++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	var b strings.Builder
	b.WriteString("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n")
	for g := range 2 {
		fmt.Fprintf(&b, "DCGM_FI_DEV_POWER_USAGE{gpu=\"%d\",UUID=\"GPU-%d\",modelName=\"Test GPU\"} %g\n", g, g, dcgmPowerW[g])
	}
	b.WriteString("# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n")
	for g := range 2 {
		fmt.Fprintf(&b, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"%d\",UUID=\"GPU-%d\",modelName=\"Test GPU\"} %.0f\n", g, g, dcgmStartMJ[g]+float64(n)*dcgmStepMJ[g])
	}
	_, _ = w.Write([]byte(b.String()))
}

// replay --scrape-url a DCGM exporter, then analyze: the run's joules are
// the two GPUs' counter increases over the scrapes that bracket it
// (scrapes-1 steps of 1.5 J and 2.5 J), and the per-token, per-request
// and power figures follow from them and the run's own counts.
func TestReplayScrapeDCGMEnergy(t *testing.T) {
	srv, tr := scrapeFixture(t)
	dcgm := httptest.NewServer(&fakeDCGM{})
	defer dcgm.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "run.parquet")
	args := append([]string{"replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze", "--scrape", "--scrape-interval", "50ms",
		"--scrape-timeout", "10s", "--scrape-url", dcgm.URL + "/metrics"}, replayArgs...)
	if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
		t.Fatalf("replay exit %d\n%s\n%s", code, stdout, stderr)
	}
	d, err := telemetry.Read(trace.MetricsPath(out))
	if err != nil {
		t.Fatal(err)
	}
	target := dcgm.URL + "/metrics"
	scrapes := 0
	for _, sc := range d.ScrapesOf(target, telemetry.All) {
		if !sc.OK {
			t.Fatalf("a scrape of the fake exporter failed: %+v", sc)
		}
		scrapes++
	}
	if scrapes < 3 {
		t.Fatalf("%d scrapes of the exporter", scrapes)
	}

	jsonPath := filepath.Join(dir, "a.json")
	text, stderr, code := runCLI(t, "analyze", out, "--json", jsonPath)
	if code != ExitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	sr := readServerJSON(t, jsonPath)
	for _, tg := range sr.Targets {
		if tg.Target != target {
			if tg.Energy != nil {
				t.Errorf("%s: energy figures %+v from a target without DCGM counters", tg.Target, tg.Energy)
			}
			continue
		}
		en := tg.Energy
		if en == nil {
			t.Fatalf("no energy figures for the exporter: %+v", tg)
		}
		// The scrapes that bracket the analysis window (on the sidecar's
		// clock): the last at or before its start, the first at or after
		// its end. The exporter's n-th scrape reads n steps of 4 J.
		shift := sr.Sidecars[tg.Sidecar].ShiftNs
		from, to := int64(tg.FromS*1e9)-shift, int64(tg.ToS*1e9)-shift
		i0, i1 := 0, -1
		for i, sc := range d.ScrapesOf(target, telemetry.All) {
			if sc.TimeNs <= from {
				i0 = i
			}
			if sc.TimeNs >= to && i1 < 0 {
				i1 = i
			}
		}
		// The counters as recorded at those scrapes: a scrape Stop cut in
		// flight reached the exporter (which stepped) but is not recorded.
		want := 0.0
		series := d.Find(target, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
		for _, s := range series {
			if len(s.Points) != scrapes || i1 < 0 {
				t.Fatalf("%d points of %s for %d scrapes", len(s.Points), s.Name, scrapes)
			}
			want += (s.Points[i1].Value - s.Points[i0].Value) / 1e3
		}
		if steps := float64(i1-i0) * (dcgmStepMJ[0] + dcgmStepMJ[1]) / 1e3; len(series) != 2 || want < steps {
			t.Fatalf("%d energy series; %g J between scrapes %d and %d, want at least %g", len(series), want, i0, i1, steps)
		}
		if en.GPUs != 2 || i1 <= i0 || math.Abs(en.Joules-want) > 1e-6 {
			t.Fatalf("energy %+v: want 2 GPUs and %g J (scrapes %d to %d of %d)", en, want, i0, i1, scrapes)
		}
		if en.OutputTokens != 16*16 || en.Requests != 16 {
			t.Fatalf("energy %+v: want the run's 256 output tokens and 16 requests", en)
		}
		if en.TokensPerJoule == nil || math.Abs(*en.TokensPerJoule-256/en.Joules) > 1e-9 ||
			en.JoulesPerRequest == nil || math.Abs(*en.JoulesPerRequest-en.Joules/16) > 1e-9 {
			t.Fatalf("energy %+v: per-token or per-request figure off", en)
		}
		if en.SpanS <= 0 || math.Abs(en.MeanPowerW-en.Joules/en.SpanS) > 1e-9 {
			t.Fatalf("energy %+v: mean power is joules over the span", en)
		}
		if en.PowerGaugeW == nil || *en.PowerGaugeW != dcgmPowerW[0]+dcgmPowerW[1] {
			t.Fatalf("energy %+v: the power gauge summed over GPUs is %g W", en, dcgmPowerW[0]+dcgmPowerW[1])
		}
		for _, want := range []string{"Energy (GPUs):", "Output tokens per joule:", "Joules per request:"} {
			if !strings.Contains(text, want) {
				t.Errorf("analyze output lacks %q:\n%s", want, text)
			}
		}
		return
	}
	t.Fatalf("the exporter %s is not in the server section: %+v", target, sr.Targets)
}
