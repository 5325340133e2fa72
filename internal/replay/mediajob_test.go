package replay

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// A media worker that gets no CPU (a low-priority thread beside busy
// processes) does not hold the run: once the dispatcher waits for the
// look-ahead, it makes the item the worker is on itself, and the worker
// drops its copy at its next step; a conversation begun while the
// dispatcher waits is made at once too. Here the workers' pause never
// returns until the end: the starved thread.
func TestWaitingRunMakesStarvedMedia(t *testing.T) {
	m, err := newMaterializer(trace.TraceMeta{Tokenizer: "o200k_base"}, true)
	if err != nil {
		t.Fatal(err)
	}
	var turns []trace.Turn
	var want []string
	for i := range 2 {
		img := trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 512, Height: 512, Seed: int64(i)}
		b, err := media.Make(nil, &img)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(b))
		turns = append(turns, trace.Turn{ConversationID: fmt.Sprint(i), Endpoint: trace.EndpointChat,
			Messages: []trace.Message{{Role: "user", Content: "x", Media: []trace.Media{img}}}})
	}
	release := make(chan struct{})
	var pauses atomic.Int32
	p := &prefetch{src: NewMemorySource(trace.TraceMeta{}, turns), mat: m, mine: func([]trace.Turn) bool { return true },
		done: make(chan struct{}), maxLen: prefetchConvs, maxB: prefetchBytes, primed: true}
	p.cond.L = &p.mu
	p.pause = func() {
		pauses.Add(1)
		<-release
	}
	go p.run()
	stopped := false
	defer func() {
		if !stopped {
			close(release)
			p.stop()
		}
	}()

	// The first conversation's worker is inside its item, starved.
	for deadline := time.Now().Add(time.Minute); pauses.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no media worker began the first item in a minute")
		}
	}
	for i := range turns {
		got := make(chan []trace.Turn, 1)
		go func() {
			conv, err := p.Next()
			if err != nil {
				t.Error(err)
			}
			got <- conv
		}()
		select {
		case conv := <-got:
			if len(conv) != 1 || conv[0].Messages[0].Media[0].Data != want[i] {
				t.Fatalf("conversation %d: the item made while the run waited differs from media.Make's", i)
			}
		case <-time.After(time.Minute):
			t.Fatalf("conversation %d: the run still waits for a starved media worker after a minute", i)
		}
	}
	// Each conversation's workers are stopped in their first pause.
	most := int32(len(turns) * m.workers)
	if n := pauses.Load(); n > most {
		t.Errorf("%d pauses before release, want at most %d: a worker went past the one it was starved in", n, most)
	}
	close(release)
	stopped = true
	p.stop()
	// A worker let go leaves its item at its next step: it pauses no more.
	if n := pauses.Load(); n > most {
		t.Errorf("%d pauses in all, want at most %d: a worker went on with an item already made", n, most)
	}
	if _, err := p.Next(); err == nil {
		t.Error("Next after the source ended returned no error")
	}
}
