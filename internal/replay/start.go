package replay

import (
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// A distributed run is n processes (shards), each replaying the
// conversations whose id hashes to its index. What makes them one run:
//
//   - a start barrier (Config.StartAt): every shard prepares (ready checks,
//     probe), reads its first batch of the trace (Runner.prime: its first
//     conversations are launched from memory, not after file reads that
//     would make them late), then converts the wall-clock instant to CLOCK_MONOTONIC once
//     and waits for it on the dispatcher; its run clock starts at that
//     monotonic instant, so every shard's schedule is anchored on the same
//     wall instant, up to the hosts' clock disagreement;
//   - a run id shared by the shards (Config.RunID, else derived from the
//     trace's content and the start instant: shards of one StartAt agree);
//   - the host clock's sync state (adjtimex) in RunMeta.Clock, so analyze
//     can say how well the shards' timelines line up.

// MaxStartAhead is the furthest ahead a start instant may be: a shard
// waits for it, and an instant further off is a mistake (a wrong date, a
// unit slip), not a plan.
const MaxStartAhead = 24 * time.Hour

// StartError is returned by Run when the start instant (Config.StartAt) had
// already passed once the targets were ready and probed: the run did not
// start, rather than start late.
type StartError struct {
	StartAt time.Time
	Late    time.Duration // how long ago StartAt was
}

func (e *StartError) Error() string {
	return fmt.Sprintf("the start instant %s passed %v ago (a shard must be ready before it)",
		e.StartAt.UTC().Format(time.RFC3339Nano), e.Late.Round(time.Microsecond))
}

// CheckStart returns a *StartError when Config.StartAt has passed, nil when
// it is in the future or unset.
func (c Config) CheckStart() error {
	if c.StartAt.IsZero() {
		return nil
	}
	if late := time.Since(c.StartAt); late >= 0 {
		return &StartError{StartAt: c.StartAt, Late: late}
	}
	return nil
}

// runIDPattern is what a run id may hold: it names files and appears in
// messages.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckRunID validates a run id: 1-128 letters, digits, '.', '_' or '-',
// starting with a letter or digit.
func CheckRunID(id string) error {
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("run id %q: expected 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// startClock settles the run's identity and starts its clock: it derives
// the run id, reads the host clock's sync state, waits for StartAt if set
// and sets r.start and meta's start, run id, shard and clock fields. The
// clock starts headroom ns from now (or that long after the wait for
// StartAt ends, at StartAt itself), so the first conversations' goroutines
// are launched their lead ahead of their starts as the later ones are;
// nothing is sent before the start. An error means the clock did not start
// and nothing was sent.
func (r *runState) startClock(ctx context.Context, meta *trace.RunMeta, headroom int64) error {
	id := r.cfg.RunID
	var sum []byte
	if r.cfg.Trace != "" {
		// Hashed before the barrier, so the wait absorbs the cost; the
		// hash names the trace in the recording (provenance) and the run.
		d, err := digestTrace(r.cfg.Trace)
		if err != nil {
			return err
		}
		sum = d.sum
		if meta.Config == nil {
			meta.Config = map[string]any{}
		}
		meta.Config["trace_sha256"], meta.Config["trace_bytes"] = hex.EncodeToString(d.sum), d.size
	}
	off, width := clock.WallMinusMono()
	sync := clock.ReadSync()
	clk := &trace.RunClock{WallMinusMonoNs: off, ConversionErrNs: width, Sync: trace.ClockUnknown,
		EstErrorNs: sync.EstErrorNs, MaxErrorNs: sync.MaxErrorNs, Source: sync.Source}
	if sync.Known {
		clk.Sync = trace.ClockUnsynced
		if sync.Synced {
			clk.Sync = trace.ClockSynced
		}
	}
	if r.cfg.StartAt.IsZero() {
		r.start = clock.Mono() + headroom
	} else {
		at := r.cfg.StartAt.UnixNano() - off
		if late := clock.Mono() - at; late >= 0 {
			return &StartError{StartAt: r.cfg.StartAt, Late: time.Duration(late)}
		}
		r.logf("waiting %v for the start instant %s", time.Duration(at-clock.Mono()).Round(time.Millisecond),
			r.cfg.StartAt.UTC().Format(time.RFC3339Nano))
		lag, err := r.disp.WaitUntil(ctx, at-headroom)
		if err != nil {
			return fmt.Errorf("waiting for the start instant: %w", err)
		}
		lag = clock.Mono() - at // of the wake-up a headroom early: how late the start instant was passed, if it was
		// The schedule is anchored on the instant itself, not on the
		// wake-up: a late wake shows as the first requests' lateness.
		r.start = at
		clk.StartAtNs, clk.StartLagNs = r.cfg.StartAt.UnixNano(), max(lag, 0)
	}
	meta.StartMonoNs, meta.StartWallNs = r.start, r.start+off
	meta.Clock = clk
	if id == "" {
		startNs := meta.StartWallNs
		if clk.StartAtNs != 0 {
			startNs = clk.StartAtNs // exact, the same in every shard
		}
		id = DeriveRunID(sum, startNs)
	}
	meta.RunID = id
	if r.cfg.Shards > 1 {
		meta.Shard = &trace.RunShard{Index: r.cfg.Shard, Count: r.cfg.Shards}
	}
	return nil
}

// DeriveRunID names a run from its trace's SHA-256 and its start instant
// (unix ns): the first 8 hex digits of the hash, then the instant in UTC,
// e.g. "3fa2c1d0-20261201T120000Z".
func DeriveRunID(traceSHA256 []byte, startWallNs int64) string {
	n := min(4, len(traceSHA256))
	return hex.EncodeToString(traceSHA256[:n]) + "-" +
		time.Unix(0, startWallNs).UTC().Format("20060102T150405.999999999Z")
}
