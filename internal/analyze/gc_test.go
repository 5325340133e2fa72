package analyze

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Analyses run at gcPercent, and ones that overlap leave the setting as
// the first found it, whichever ends last.
func TestAnalysesShareTheGCSetting(t *testing.T) {
	if v := gogc(); v == gcPercent {
		t.Skipf("GOGC is already %d", v)
	}
	t.Setenv("GOGC", "") // a GOGC variable would leave the setting alone
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	a := fewerCycles()
	b := fewerCycles()
	if v := gogc(); v != gcPercent {
		t.Fatalf("during two analyses GOGC is %d, want %d", v, gcPercent)
	}
	a()
	if v := gogc(); v != gcPercent {
		t.Errorf("after the first of two ended GOGC is %d, want %d", v, gcPercent)
	}
	a() // twice: counted once
	if v := gogc(); v != gcPercent {
		t.Errorf("after the first of two ended, restored twice, GOGC is %d, want %d", v, gcPercent)
	}
	b()
	if v := gogc(); v != 77 {
		t.Errorf("after both ended GOGC is %d, want 77", v)
	}
}
