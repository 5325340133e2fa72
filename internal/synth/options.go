package synth

import (
	"errors"
	"fmt"
	"math"

	"github.com/tracekit/tracekit/internal/fielderr"
)

// fieldErr is a *fielderr.Error about the field field of the options type
// st ("ImportOptions", "Start"), so that a front end can say which of its
// own settings (a flag, a config key) was wrong. The message says what the
// value was and what was expected; it names no field itself (Error puts
// the field's name first, the command line its flag and value).
func fieldErr(st, field, format string, args ...any) error {
	return fielderr.Errorf("synth."+st, field, format, args...)
}

// ErrTooLarge is wrapped by the field error (field MaxBytes) of a source
// asked for a trace whose text would not fit the limit.
var ErrTooLarge = errors.New("trace too large")

// DefaultMaxBytes is the default limit of a trace's estimated text: far
// above any benchmark trace, below what makes the Go runtime abort with
// out of memory on a workstation and below the 4 GiB a Parquet page holds.
const DefaultMaxBytes int64 = 2 << 30

// maxTokens is the most tokens one message or answer may have: the trace
// stores token counts as int32.
const maxTokens = math.MaxInt32

// checkSize refuses an estimate of est bytes above limit (0: no limit);
// what says where the estimate comes from.
func checkSize(st string, est float64, limit int64, what string) error {
	if limit <= 0 || est <= float64(limit) {
		return nil
	}
	return fieldErr(st, "MaxBytes", "%w: %s would hold about %s of text, above the limit of %s",
		ErrTooLarge, what, formatBytes(est), formatBytes(float64(limit)))
}

// formatBytes writes n bytes with a binary unit.
func formatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// distMax is the largest value d can give, +Inf when unbounded.
func distMax(d Dist) float64 {
	switch d := d.(type) {
	case Constant:
		return d.V
	case Uniform:
		return d.Max
	case Zipf:
		return float64(d.Max)
	case Bounded:
		if d.Max > 0 {
			return min(d.Max, distMax(d.D))
		}
		return distMax(d.D)
	case UserTurns:
		return math.Ceil(max(math.Round(distMax(d.Messages)), 2) / 2)
	}
	return math.Inf(1)
}

// distMean is d's mean with a Bounded distribution's clamps applied to it
// (an estimate: the clamped law's exact mean needs its density).
func distMean(d Dist) float64 {
	if d == nil {
		return 0
	}
	if b, ok := d.(Bounded); ok {
		m := max(distMean(b.D), b.Min)
		if b.Max > 0 {
			m = min(m, b.Max)
		}
		return m
	}
	return d.Mean()
}

// checkCount refuses a count distribution that can never reach lo (its
// samples are rounded) or that can give values a trace cannot store.
func checkCount(st, field string, d Dist, lo float64) error {
	if d == nil {
		return fieldErr(st, field, "no distribution")
	}
	hi := distMax(d)
	if math.Round(hi) < lo {
		return fieldErr(st, field, "%s never reaches %g", d, lo)
	}
	if !math.IsInf(hi, 1) && hi > maxTokens {
		return fieldErr(st, field, "%s gives up to %.0f, above the %d a trace stores", d, hi, maxTokens)
	}
	return nil
}
