package trace

// RunShard is one shard's place in a distributed run: it replayed the
// conversations whose id hashes to Index modulo Count.
type RunShard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Clock-sync states of RunClock.Sync.
const (
	ClockSynced   = "synchronized"   // the kernel's NTP state says the clock is disciplined
	ClockUnsynced = "unsynchronized" // STA_UNSYNC set or TIME_ERROR: the error bounds mean nothing
	ClockUnknown  = "unknown"        // the platform does not say (no adjtimex)
)

// RunClock is how a run's clock started and how far the host's wall
// clock can be trusted, so the shards of one run on several hosts can be
// aligned and their disagreement bounded.
//
// A run's times are CLOCK_MONOTONIC ns from RunMeta.StartMonoNs, and
// RunMeta.StartWallNs is the same instant in the wall clock:
//
//	wall(t) = mono(t) + WallMinusMonoNs,  StartWallNs = StartMonoNs + WallMinusMonoNs
//
// With a start barrier (replay --start-at), StartAtNs is the instant asked
// for (unix ns), converted once to the monotonic clock and waited for on
// it: StartMonoNs is that converted instant, so StartWallNs equals StartAtNs
// up to the conversion's rounding, and StartLagNs is how late the wait
// returned (the shard's clock began StartLagNs after StartAtNs; its first
// requests are late by that much and record it). The instant a shard
// really started is StartWallNs + StartLagNs.
type RunClock struct {
	StartAtNs       int64 `json:"start_at_ns,omitempty"` // the barrier instant, unix ns; 0 without one
	StartLagNs      int64 `json:"start_lag_ns"`          // wake-up after the barrier (0 without one)
	WallMinusMonoNs int64 `json:"wall_minus_mono_ns"`    // CLOCK_REALTIME - CLOCK_MONOTONIC at the start
	// ConversionErrNs bounds the error of WallMinusMonoNs: the width of the
	// narrowest bracket of monotonic reads around one wall read.
	ConversionErrNs int64 `json:"conversion_err_ns"`

	// The host clock's discipline from adjtimex(2) at the start.
	Sync       string `json:"sync"`                   // ClockSynced, ClockUnsynced or ClockUnknown
	EstErrorNs int64  `json:"est_error_ns,omitempty"` // the kernel's estimated error (esterror)
	MaxErrorNs int64  `json:"max_error_ns,omitempty"` // the kernel's maximum error (maxerror)
	Source     string `json:"source,omitempty"`       // where Sync came from, e.g. "adjtimex"
}

// Started is the instant (unix ns, the host's wall clock) the run's clock
// really began: StartWallNs + StartLagNs.
func (m RunMeta) Started() int64 {
	if m.Clock == nil {
		return m.StartWallNs
	}
	return m.StartWallNs + m.Clock.StartLagNs
}
