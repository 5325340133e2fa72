package calibrate

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// A live pair: the same stream step twice, each into a recording file
// (no Dir: a temporary one), the second with the live view fed from the
// recorder's tap. Both join every event; only the second's view took a
// record, all of them.
func TestLivePairJoinsEveryEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	cfg := Config{Streams: []int{}, LivePairs: []int{6}, EventsPerS: []float64{60}, Duration: 400 * time.Millisecond, MaxError: time.Second,
		Mode: ModeProcess, MockCommand: []string{os.Args[0]}, MockEnv: []string{childEnv + "=1"}, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // hang guard, not a budget
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Steps {
		names = append(names, r.Name)
	}
	if want := []string{"probe", "streams=6+view-off", "streams=6+view-on"}; !slices.Equal(names, want) {
		t.Fatalf("steps %v, want %v", names, want)
	}
	for i, r := range rep.Steps[1:] {
		p := size(r.Step, cfg.Duration, r.Step.ITL(), i+1)
		n := p.requests * (p.maxTokens + 1)
		if r.Matched != n || r.Unmatched != 0 || r.Errors != 0 {
			t.Errorf("%s: matched %d of %d events, %d unmatched, %d errors", r.Name, r.Matched, n, r.Unmatched, r.Errors)
		}
		want := int64(0)
		if r.Step.LiveView == "on" {
			want = int64(r.Requests)
		}
		if r.LiveSamples != want || r.LiveDropped != 0 {
			t.Errorf("%s: the live view took %d records (%d dropped), want %d", r.Name, r.LiveSamples, r.LiveDropped, want)
		}
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "streams=6+view-on: the live view took 6 records from the recorder's tap (0 dropped)") {
		t.Errorf("text report lacks the live view's note:\n%s", out.String())
	}
}
