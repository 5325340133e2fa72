package analyze

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
)

// On run sets the gate compares the means across runs. With beyondCI a
// condition fails only when the change of the means passes its threshold
// and the change also clears the noise: for '>' the lower end of B's
// interval lies above the upper end of A's, for '<' the upper end of B's
// lies below the lower end of A's. Disjoint intervals are a conservative
// test (it misses some real changes, it rarely fails on noise); a single
// recording on one side is a set of one, whose interval is its value.

// EvaluateGateRuns evaluates conds on the means of run sets a and b. An
// error (wrapping ErrBadInput) says a condition names a percentile the
// runs did not compute.
func EvaluateGateRuns(conds []GateCondition, a, b *RunSet, beyondCI bool) ([]GateResult, error) {
	var out []GateResult
	for _, c := range conds {
		sa, err := a.stat(c.Metric)
		if err != nil {
			return nil, err
		}
		sb, err := b.stat(c.Metric)
		if err != nil {
			return nil, err
		}
		r := judge(c, sa.Mean, sb.Mean)
		if r.Failed && beyondCI {
			clear := sb.CILow > sa.CIHigh
			if !c.Above {
				clear = sb.CIHigh < sa.CILow
			}
			if !clear {
				r.Failed, r.WithinNoise = false, true
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// WriteCompareRuns prints the metrics of two run sets side by side: each
// side's mean ± half width of its interval, the relative change of the
// means, and whether the intervals are disjoint.
func WriteCompareRuns(w io.Writer, a, b *RunSet, nameA, nameB string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, center(" Comparison of run sets ", '=', 110))
	fmt.Fprintf(bw, "A: %s (%s)\nB: %s (%s)\n", nameA, plural(len(a.Runs), "run", "runs"), nameB, plural(len(b.Runs), "run", "runs"))
	fmt.Fprintf(bw, "means ± the half width of the %s%% confidence interval of each\n", pWord(100*a.Confidence))
	fmt.Fprintf(bw, "%-34s %24s %24s %10s %12s\n", "metric", "A", "B", "change", "intervals")
	for _, ma := range a.Metrics {
		mb, err := b.stat(ma.Metric)
		if err != nil {
			continue // a percentile only A computed
		}
		pct := "n/a"
		if ma.Mean != 0 {
			pct = fmt.Sprintf("%+.2f%%", 100*(mb.Mean-ma.Mean)/math.Abs(ma.Mean))
		}
		sep := "overlap"
		if mb.CILow > ma.CIHigh || mb.CIHigh < ma.CILow {
			sep = "disjoint"
		}
		fmt.Fprintf(bw, "%-34s %24s %24s %10s %12s\n", ma.Name, pm(ma), pm(mb), pct, sep)
	}
	fmt.Fprintln(bw, strings.Repeat("=", 110))
	return bw.Flush()
}

// pm formats mean ± half width.
func pm(s RunStat) string { return fmt.Sprintf("%.2f ± %.2f", s.Mean, s.HalfWidth) }
