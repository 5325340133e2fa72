package live

import (
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/chromiumtest"
)

// fixed is a Snapshotter of one snapshot.
type fixed Snapshot

func (f fixed) Snapshot() Snapshot { return Snapshot(f) }

// The live page in headless Chromium, for a run with client health (a
// replay) and without (a capture, Health.Cores 0): the figures render,
// and the health block shows only where there is one. Chromium that
// crashes (it may under load) is launched once more.
func TestPageHealthBlockInChromium(t *testing.T) {
	chromium := chromiumtest.Path(t) // opt-in: make render-check
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		health HealthView
		hidden bool
	}{
		{"replay", HealthView{DispatchLagP50Ms: 0.2, DispatchLagP99Ms: 1.5, Cores: 2, CPUPercent: 40}, false},
		{"capture", HealthView{}, true},
	} {
		snap := Snapshot{Label: c.name + " out/", WindowS: 10, ElapsedS: 12, Done: 7, InFlight: 0, Failed: 1,
			FailedByKind: map[string]int64{"http_status": 1}, WindowDone: 7, WindowFailed: 1,
			TTFT: Percentiles{N: 6, P50Ms: 40, P90Ms: 55, P99Ms: 60}, Health: c.health, Finished: true}
		srv, err := Serve("127.0.0.1:0", fixed(snap), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		dom := chromiumtest.Run(t, chromium, dir, c.name, "--virtual-time-budget=10000", "--dump-dom", srv.URL())
		srv.Close()
		page := string(dom)
		for _, want := range []string{`<span id="state">(finished)</span>`, `<b id="done">7</b>`, `<b id="failed">1</b>`, "failures: http_status 1"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the rendered page lacks %q:\n%s", c.name, want, page)
			}
		}
		if hidden := strings.Contains(page, `id="health_head" hidden=""`); hidden != c.hidden {
			t.Errorf("%s: health block hidden %v, want %v:\n%s", c.name, hidden, c.hidden, page)
		}
		if got := strings.Contains(page, "dispatch lag p50 0.20 ms"); got == c.hidden {
			t.Errorf("%s: health figures shown %v", c.name, got)
		}
	}
}
