package live

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// BenchmarkReplayWithLiveView replays one-turn streams against the
// in-process mock into a real recording, with the live view off and on
// (the recorder's tap feeding a View, a dashboard rendered every 100 ms,
// as --progress dashboard does), and reports the per-event stamp error
// against the mock's own write times and the dispatch lag: the two should
// not move with the view on.
//
//	go test -run '^$' -bench ReplayWithLiveView -benchtime 3x ./internal/live/
func BenchmarkReplayWithLiveView(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("view=%v", on), func(b *testing.B) {
			for range b.N {
				benchReplay(b, on, 2000)
			}
		})
	}
}

func benchReplay(b *testing.B, on bool, streams int) {
	srv := mocktest.Start(b, func(c *mock.Config) {
		c.Latency.DecodeBase = mock.Duration(20 * time.Millisecond)
		c.Latency.MaxNumSeqs = streams + 10
		c.KeepBodies = false
	})
	dir := b.TempDir()
	tr := filepath.Join(dir, "trace.parquet")
	turns := make([]trace.Turn, streams)
	for i := range turns {
		off := int64(2*time.Second) * int64(i) / int64(streams)
		turns[i] = trace.Turn{ConversationID: fmt.Sprintf("c%05d", i), StartOffsetNs: off, ArrivalOffsetNs: off, OutputTokens: 16, InputTokens: 5,
			Messages: []trace.Message{{Role: "user", Content: "hello there", Tokens: 5}}}
	}
	if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "bench"}, turns); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rec *record.Recorder
	var stopView func()
	open := func(r *replay.Runner) (record.Sink, error) {
		var ro record.RecorderOptions
		var feed *Feed
		if on {
			feed = NewFeed(0)
			ro.Tap = feed.Offer
		}
		var err error
		if rec, err = record.NewRecorder(filepath.Join(dir, "run.parquet"), trace.RunMeta{}, ro); err != nil {
			return nil, err
		}
		stopView = func() {}
		if on {
			v := NewView(feed, Sources{Counts: func() Counts {
				s := r.Stats()
				return Counts{Total: s.Total, Done: s.Done, InFlight: s.InFlight, Failed: s.Errors, Elapsed: s.Elapsed}
			}}, Options{})
			vctx, vcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); v.Run(vctx) }()
			drawn := make(chan struct{})
			go func() { // the dashboard's refresh
				defer close(drawn)
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-vctx.Done():
						return
					case <-t.C:
						_ = Render(v.Snapshot())
					}
				}
			}()
			stopView = func() { vcancel(); <-done; <-drawn }
		}
		return rec, nil
	}
	b.ResetTimer()
	res, err := replay.Record(ctx, replay.Config{Trace: tr, Targets: []string{srv.URL()}, Model: "tracekit-mock", IgnoreEOS: true, Timing: replay.TimingTrace}, nil, open)
	b.StopTimer()
	if stopView != nil {
		stopView()
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	recs, _, err := trace.ReadRecords(filepath.Join(dir, "run.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	server := map[string][]int64{}
	for _, e := range srv.Log() {
		server[e.RequestID] = e.EventMonoNs
	}
	var errs []int64
	for _, r := range recs {
		ev := server[r.RequestID]
		if len(ev) != len(r.EventNs) {
			continue
		}
		for i, ns := range r.EventNs {
			errs = append(errs, res.Meta.StartMonoNs+ns-ev[i])
		}
	}
	if len(errs) == 0 {
		b.Fatalf("no event matched the mock's log (%d records)", len(recs))
	}
	slices.Sort(errs)
	b.ReportMetric(float64(errs[len(errs)/2])/1e3, "stamp-err-p50-us")
	b.ReportMetric(float64(errs[len(errs)*99/100])/1e3, "stamp-err-p99-us")
	h := res.Meta.Health
	b.ReportMetric(float64(h.DispatchLagP99Ns)/1e3, "dispatch-p99-us")
	b.ReportMetric(float64(res.Errors), "errors")
}
