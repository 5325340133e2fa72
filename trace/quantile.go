package trace

import "math"

// Percentile returns numpy.percentile(sorted, p) with the default linear
// method: h = (n-1)*p/100, value = x[floor h] + (h - floor h) * (x[ceil h] -
// x[floor h]), using numpy's two-sided lerp so results match bit for bit.
// sorted must be ascending; an empty slice gives 0 (vLLM's `x or 0`).
// Every statistic tracekit prints (inspect and analyze) uses it.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := float64(n-1) * p / 100
	lo := int(math.Floor(h))
	if lo < 0 {
		return sorted[0]
	}
	if lo >= n-1 {
		return sorted[n-1]
	}
	return Lerp(sorted[lo], sorted[lo+1], h-float64(lo))
}

// Lerp is numpy's _lerp: a + (b-a)*t computed from the nearer end, exact
// at both.
func Lerp(a, b, t float64) float64 {
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t)
	}
	return a + d*t
}
