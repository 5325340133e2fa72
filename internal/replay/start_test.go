package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// With StartAt, the run's clock starts at that wall instant converted to
// the monotonic clock: no request reaches the mock before it (the mock's
// own stamps), the recorded start is the instant itself in both clocks,
// and the clock metadata says how it was set.
func TestStartAtAnchorsTheClock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("a", 2, 0, 5*time.Millisecond, 3), conv("b", 1, 10*time.Millisecond, 0, 3))
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Set once prepared, so a slow start-up cannot make it pass.
	at := time.Now().Add(time.Second)
	r.cfg.StartAt = at
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Sent != 3 || res.Errors != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
	m := sink.RunMeta()
	c := m.Clock
	if c == nil || c.StartAtNs != at.UnixNano() || c.StartLagNs < 0 || c.Sync == "" {
		t.Fatalf("clock meta %+v", c)
	}
	// StartWallNs is StartAt up to the conversion (integer rounding only:
	// StartMonoNs is StartAt minus the offset and StartWallNs adds it back).
	if m.StartWallNs != at.UnixNano() || m.StartMonoNs+c.WallMinusMonoNs != m.StartWallNs {
		t.Errorf("start wall %d mono %d offset %d, want wall %d", m.StartWallNs, m.StartMonoNs, c.WallMinusMonoNs, at.UnixNano())
	}
	// The mock stamps arrivals on the same CLOCK_MONOTONIC: every traffic
	// request arrived after the barrier's monotonic instant.
	recs := sink.byID()
	n := 0
	for _, e := range srv.Log() {
		if _, ok := recs[e.RequestID]; !ok {
			continue // the probe
		}
		n++
		if e.ArrivalMonoNs < m.StartMonoNs {
			t.Errorf("%s reached the mock %d ns before the start instant", e.RequestID, m.StartMonoNs-e.ArrivalMonoNs)
		}
	}
	if n != 3 {
		t.Errorf("the mock logged %d of the 3 requests", n)
	}
	for id, r := range recs {
		if r.SlotNs < r.IntendedNs || r.SentNs < r.SlotNs {
			t.Errorf("%s: intended %d slot %d sent %d out of order", id, r.IntendedNs, r.SlotNs, r.SentNs)
		}
	}
	if m.RunID == "" || !strings.HasSuffix(m.RunID, at.UTC().Format("20060102T150405.999999999Z")) {
		t.Errorf("run id %q does not end with the start instant", m.RunID)
	}
}

// A start instant that has passed by the time the targets are ready fails
// the run before anything is sent, with how late it was.
func TestStartAtPassed(t *testing.T) {
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("a", 1, 0, 0, 3))
	at := time.Now().Add(-1500 * time.Millisecond)
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, StartAt: at}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var se *StartError
	if err := r.Config().CheckStart(); !errors.As(err, &se) || se.Late < 1500*time.Millisecond {
		t.Fatalf("CheckStart: %v", err)
	}
	res, err := r.Run(context.Background(), &memSink{})
	if !errors.As(err, &se) || se.Late < 1500*time.Millisecond || res != nil {
		t.Fatalf("Run: %v, %+v; want a StartError at least 1.5 s late and no result", err, res)
	}
	// The lateness printed is the error's own (at least 1.5 s: how much
	// more depends on how loaded the machine is).
	if !strings.Contains(err.Error(), at.UTC().Format(time.RFC3339Nano)) ||
		!strings.Contains(err.Error(), " passed "+se.Late.Round(time.Microsecond).String()+" ago") {
		t.Errorf("the error does not name the instant and the lateness %v: %v", se.Late, err)
	}
	for _, e := range srv.Log() {
		if e.RequestID == "a-0-0" {
			t.Error("a request was sent after the start instant had passed")
		}
	}
}

// A canceled wait for the start instant ends the run before the clock,
// promptly, with the cause.
func TestStartAtWaitCanceled(t *testing.T) {
	srv := mocktest.Start(t, nil)
	r, err := New(Config{Trace: writeTrace(t, conv("a", 1, 0, 0, 3)), Targets: []string{srv.URL()}, StartAt: time.Now().Add(time.Hour)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		res, err := r.Run(ctx, &memSink{})
		if res != nil {
			err = fmt.Errorf("a result %+v from a run that never started", res)
		}
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want the cancellation", err)
		}
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("Run still waits for the start instant after its context ended")
	}
}

// Shards of one StartAt derive the same run id from the trace's content
// (not its path) and the instant; another instant or trace gives another.
func TestDerivedRunID(t *testing.T) {
	srv := mocktest.Start(t, nil)
	a := writeTrace(t, conv("a", 1, 0, 0, 3), conv("b", 1, 0, 0, 3))
	b := writeTrace(t, conv("a", 1, 0, 0, 3), conv("b", 1, 0, 0, 3)) // same bytes, other file
	other := writeTrace(t, conv("c", 1, 0, 0, 3))
	// The shards run at once, as they would: one StartAt for both, set
	// once all are prepared so a slow start-up cannot make it pass.
	cfgs := map[string]Config{
		"shard0": {Trace: a, Shard: 0, Shards: 2},
		"shard1": {Trace: b, Shard: 1, Shards: 2},
		"other":  {Trace: other},
		"given":  {Trace: a, RunID: "bench-001"},
	}
	runners := map[string]*Runner{}
	for name, cfg := range cfgs {
		cfg.Targets = []string{srv.URL()}
		r, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		runners[name] = r
	}
	at := time.Now().Add(time.Second)
	type out struct {
		name string
		meta trace.RunMeta
		err  error
	}
	outs := make(chan out, len(cfgs))
	for name, r := range runners {
		if name != "given" {
			r.cfg.StartAt = at
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sink := &memSink{}
			_, err := r.Run(ctx, sink)
			outs <- out{name, sink.RunMeta(), err}
		}()
	}
	ids := map[string]string{}
	for range cfgs {
		o := <-outs
		if o.err != nil {
			t.Fatalf("%s: %v", o.name, o.err)
		}
		ids[o.name] = o.meta.RunID
		cfg := cfgs[o.name]
		m := o.meta
		if (cfg.Shards > 1) != (m.Shard != nil) || (m.Shard != nil && (m.Shard.Index != cfg.Shard || m.Shard.Count != 2)) {
			t.Errorf("%s: shard meta %+v", o.name, m.Shard)
		}
	}
	if ids["shard0"] != ids["shard1"] || ids["shard0"] == ids["other"] || ids["given"] != "bench-001" {
		t.Errorf("run ids %v", ids)
	}
	if _, err := New(Config{Trace: a, Targets: []string{srv.URL()}, RunID: "../x"}, nil); err == nil || !strings.Contains(err.Error(), "RunID") {
		t.Errorf("a run id with a slash: %v", err)
	}
}

// The clock metadata's conversion is consistent with the clocks.
func TestClockMetaWithoutBarrier(t *testing.T) {
	srv := mocktest.Start(t, nil)
	before := clock.Wall()
	sink, _ := run(t, Config{Trace: writeTrace(t, conv("a", 1, 0, 0, 3)), Targets: []string{srv.URL()}})
	m := sink.RunMeta()
	if m.Clock == nil || m.Clock.StartAtNs != 0 || m.Clock.StartLagNs != 0 || m.StartWallNs < before ||
		m.StartMonoNs+m.Clock.WallMinusMonoNs != m.StartWallNs || m.Started() != m.StartWallNs {
		t.Errorf("meta start wall %d mono %d clock %+v (wall before the run %d)", m.StartWallNs, m.StartMonoNs, m.Clock, before)
	}
	if m.Clock.Sync != trace.ClockSynced && m.Clock.Sync != trace.ClockUnsynced && m.Clock.Sync != trace.ClockUnknown {
		t.Errorf("sync %q", m.Clock.Sync)
	}
}
