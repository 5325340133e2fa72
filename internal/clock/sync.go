package clock

// SyncState is the host wall clock's discipline as the kernel reports it:
// whether an NTP/PTP daemon keeps it synchronized and how far off it may be.
// The shards of one run on several hosts are aligned on their wall clocks,
// so these bound how well.
type SyncState struct {
	// Synced is true when the kernel considers the clock synchronized
	// (adjtimex: STA_UNSYNC clear and a state other than TIME_ERROR).
	Synced bool
	// Known is false where the platform does not say (then Synced is false
	// and the errors are 0).
	Known bool
	// EstErrorNs and MaxErrorNs are the kernel's estimated and maximum
	// error of the wall clock (adjtimex's esterror and maxerror, in us).
	EstErrorNs, MaxErrorNs int64
	// Source says where the state came from ("adjtimex", or why nothing).
	Source string
}

// WallMinusMono returns CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns, and
// the bound of its error: the narrowest of a few brackets of monotonic
// reads around one wall read. A wall instant w is then monotonic instant
// w - offset.
func WallMinusMono() (offset, errNs int64) {
	errNs = 1 << 62
	for range 16 {
		before := Mono()
		w := Wall()
		after := Mono()
		if width := after - before; width < errNs {
			errNs = width
			offset = w - (before+after)/2
		}
	}
	return offset, errNs
}
