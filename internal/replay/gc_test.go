package replay

import (
	"os"
	"runtime/debug"
	"sync/atomic"
	"testing"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// gcSink records the GC percent in force when a record arrives.
type gcSink struct {
	memSink
	seen atomic.Int64
}

func (s *gcSink) Submit(r *trace.Record) {
	v := debug.SetGCPercent(-1)
	debug.SetGCPercent(v)
	s.seen.Store(int64(v))
	s.memSink.Submit(r)
}

// TestRunSetsAndRestoresGC: a run uses DefaultGCPercent (or Config's) and
// puts the process's setting back when it returns.
func TestRunSetsAndRestoresGC(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the run leaves it alone by design")
	}
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("c", 1, 0, 0, 2))
	for _, c := range []struct{ cfg, want int }{{0, DefaultGCPercent}, {250, 250}, {-1, 77}} {
		old := debug.SetGCPercent(77)
		r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, GCPercent: c.cfg}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sink := &gcSink{}
		if _, err := r.Run(t.Context(), sink); err != nil {
			t.Fatal(err)
		}
		r.Close()
		after := debug.SetGCPercent(old)
		if got := sink.seen.Load(); got != int64(c.want) || after != 77 {
			t.Errorf("GCPercent %d: %d during the run (want %d), %d after (want 77)", c.cfg, got, c.want, after)
		}
	}
}
