package trace

import "testing"

func TestFormatDuration(t *testing.T) {
	for ns, want := range map[int64]string{
		893814:        "893.8µs",
		12929871:      "12.93ms",
		418958123456:  "6m59s",
		2000000000:    "2s",
		1234:          "1.234µs",
		7:             "7ns",
		0:             "0s",
		-5123456789:   "-5.123s",
		3723000000000: "1h2m3s",
	} {
		if got := FormatDuration(ns); got != want {
			t.Errorf("FormatDuration(%d) = %q, want %q", ns, got, want)
		}
	}
}

// Gaps alternating 1 ms and 3 ms (mean 2 ms, variance 1 ms^2): gamma shape
// 4; at speed 2 the rate doubles and the shape stays.
func TestRateStatsSpeed(t *testing.T) {
	var ts []int64
	at := int64(0)
	for i := 0; i < 4001; i++ {
		ts = append(ts, at)
		at += []int64{1e6, 3e6}[i%2]
	}
	for _, speed := range []float64{1, 2} {
		r := newRateStats(ts, speed)
		if r.Burstiness < 3.99 || r.Burstiness > 4.01 {
			t.Errorf("speed %g: shape %g, want 4", speed, r.Burstiness)
		}
		if want := 500 * speed; r.PerSecond < want*0.999 || r.PerSecond > want*1.001 {
			t.Errorf("speed %g: %g/s, want %g", speed, r.PerSecond, want)
		}
		if r.OwnBinNs != int64(20e6/speed) || r.OwnDispersion > 0.1 || r.Dispersion > 0.1 {
			t.Errorf("speed %g: bin %d, dispersions %g %g; want 10 gaps, ~0 (regular)", speed, r.OwnBinNs, r.OwnDispersion, r.Dispersion)
		}
	}
	if r := newRateStats(ts[:2], 1); r.Burstiness != 0 || r.Dispersion != 0 {
		t.Errorf("two arrivals: %+v, want unknowns", r)
	}
}
