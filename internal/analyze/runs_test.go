package analyze

import (
	"math"
	"testing"
)

// Two-sided critical values of Student's t as published in standard
// tables (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
func TestTQuantileTable(t *testing.T) {
	for _, c := range []struct {
		p, df, want float64
	}{
		{0.975, 1, 12.706},
		{0.975, 2, 4.303},
		{0.975, 3, 3.182},
		{0.975, 4, 2.776},
		{0.975, 9, 2.262},
		{0.975, 29, 2.045},
		{0.975, 100, 1.984},
		{0.95, 5, 2.015},
		{0.995, 2, 9.925},
		{0.995, 10, 3.169},
		{0.9995, 1, 636.619},
		{0.90, 1, 3.078},
		{0.025, 3, -3.182},
	} {
		if got := TQuantile(c.p, c.df); math.Abs(got-c.want) > 0.0006*math.Max(1, math.Abs(c.want)/10) {
			t.Errorf("t(%g, df %g) = %.5f, want %.3f", c.p, c.df, got, c.want)
		}
	}
	// Many degrees of freedom: the normal quantile.
	if got := TQuantile(0.975, 1e7); math.Abs(got-1.959964) > 1e-5 {
		t.Errorf("t(0.975, df 1e7) = %.6f, want the normal's 1.959964", got)
	}
}

func TestRunStatFill(t *testing.T) {
	st := RunStat{Values: []float64{10, 12, 14}}
	st.fill(TQuantile(0.975, 2))
	// mean 12, sample sd 2, half width 4.303*2/sqrt(3).
	if st.Mean != 12 || math.Abs(st.StdDev-2) > 1e-12 || math.Abs(st.HalfWidth-4.302653*2/math.Sqrt(3)) > 1e-5 ||
		st.CILow != st.Mean-st.HalfWidth || math.Abs(st.CV-2.0/12) > 1e-12 || st.Min != 10 || st.Max != 14 {
		t.Errorf("%+v", st)
	}
	one := RunStat{Values: []float64{5}}
	one.fill(0)
	if one.StdDev != 0 || one.CILow != 5 || one.CIHigh != 5 {
		t.Errorf("one run: %+v", one)
	}
}

func TestRunPath(t *testing.T) {
	for in, want := range map[string]string{"run.parquet": "run-1.parquet", "d/x": "d/x-1", "a.b/c.parquet": "a.b/c-1.parquet"} {
		if got := RunPath(in, 1); got != want {
			t.Errorf("RunPath(%q) = %q, want %q", in, got, want)
		}
	}
}
