package live

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the program's renderer and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The dashboard program, its output a buffer standing in for the
// terminal: it draws the view's figures while running and leaves the last
// state, marked finished, once stopped.
func TestDashboardProgramDraws(t *testing.T) {
	feed := NewFeed(8)
	v := NewView(feed, Sources{Counts: func() Counts { return Counts{Total: 9, Done: 4, InFlight: 5, Elapsed: 3 * time.Second} }},
		Options{Label: "replay x.parquet"})
	for i := range 4 {
		v.Add(Sample{DoneNs: int64(2 * time.Second), TTFTNs: int64(40+i) * int64(time.Millisecond), E2ELNs: int64(time.Second), OutputTokens: 30})
	}
	var out syncBuffer
	stop := Dashboard(v, &out)
	deadline := time.Now().Add(30 * time.Second) // hang guard, not a budget
	for !strings.Contains(out.String(), "done 4/9") {
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard never drew the figures:\n%q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	got := out.String()
	for _, want := range []string{"replay x.parquet (finished)", "in flight 5", "TTFT", "40 output tok/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("dashboard output lacks %q:\n%s", want, got)
		}
	}
}
