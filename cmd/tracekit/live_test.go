package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/chromiumtest"
	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// liveRunFixture starts a replay of n one-turn conversations spread over
// span against the mock, serving the live page on a free loopback port;
// it returns the page's address and a channel of the run's exit code.
func liveRunFixture(t *testing.T, n int, span time.Duration) (string, <-chan int) {
	t.Helper()
	srv := mocktest.Start(t, nil)
	tr := filepath.Join(t.TempDir(), "trace.parquet")
	var turns []trace.Turn
	for i := range n {
		off := int64(span) * int64(i) / int64(n)
		turns = append(turns, trace.Turn{ConversationID: fmt.Sprintf("c%03d", i), StartOffsetNs: off, ArrivalOffsetNs: off,
			OutputTokens: 8, InputTokens: 5, Messages: []trace.Message{{Role: "user", Content: "hello there", Tokens: 5}}})
	}
	if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--progress", "none", "--no-analyze",
			"--timing", "trace", "-o", filepath.Join(t.TempDir(), "run.parquet"), "--serve-ui", addr}, io.Discard, io.Discard)
	}()
	return "http://" + addr + "/", code
}

// connect retries until the page listens (bounded: the run starts it
// after the targets answered).
func connect(t *testing.T, url string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // hang guard, not a budget
	for {
		resp, err := http.Get(url)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live page never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The live page's event stream during a real replay: snapshots of the
// run's figures until a last one marked finished, which counts every
// request and has latency percentiles from the recorder's tap.
func TestServeUIEventsDuringReplay(t *testing.T) {
	const n = 40
	url, code := liveRunFixture(t, n, 4*time.Second)
	resp := connect(t, url+"events")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var snaps []live.Snapshot
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var s live.Snapshot
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		snaps = append(snaps, s)
		if s.Finished {
			break
		}
	}
	if c := <-code; c != ExitOK {
		t.Fatalf("replay exit %d", c)
	}
	if len(snaps) == 0 || !snaps[len(snaps)-1].Finished {
		t.Fatalf("%d events, the last not finished (scan: %v)", len(snaps), sc.Err())
	}
	last := snaps[len(snaps)-1]
	if last.Done != n || last.Failed != 0 || last.InFlight != 0 {
		t.Errorf("last event: done %d failed %d in flight %d, want %d 0 0", last.Done, last.Failed, last.InFlight, n)
	}
	if last.TTFT.N == 0 || last.E2EL.N == 0 || last.ITL.N == 0 || last.TTFT.P50Ms <= 0 || last.E2EL.P99Ms < last.TTFT.P50Ms {
		t.Errorf("last event lacks latencies: ttft %+v itl %+v e2el %+v", last.TTFT, last.ITL, last.E2EL)
	}
	if !strings.HasPrefix(last.Label, "replay ") || last.Health.Cores == 0 {
		t.Errorf("last event: label %q, health %+v", last.Label, last.Health)
	}
	for i := 1; i < len(snaps); i++ {
		if snaps[i].Done < snaps[i-1].Done {
			t.Errorf("done went back from %d to %d", snaps[i-1].Done, snaps[i].Done)
		}
	}
}

// --serve-ui refuses an address beyond loopback without --serve-ui-public.
func TestServeUIRefusesNonLoopback(t *testing.T) {
	_, stderr, code := runCLI(t, "replay", "x.parquet", "--target", "http://127.0.0.1:1", "--serve-ui", "0.0.0.0:8089")
	if code != ExitUsage || !strings.Contains(stderr, "--serve-ui") || !strings.Contains(stderr, "--serve-ui-public") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// --progress dashboard on a stderr that is not a terminal says so and
// prints the plain line instead.
func TestProgressDashboardDegradesWithoutTerminal(t *testing.T) {
	tr, target := replayFixture(t)
	_, stderr, code := runCLI(t, "replay", tr, "--target", target, "--model", "tracekit-mock", "--no-analyze",
		"--progress", "dashboard", "-o", filepath.Join(t.TempDir(), "run.parquet"))
	if code != ExitOK || !strings.Contains(stderr, "stderr is not a terminal") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// The live page in headless Chromium while a replay runs: its script
// follows the event stream and renders the run's figures (read back from
// the DOM Chromium dumps once the last, finished event closed the
// stream).
func TestServeUIRendersInChromium(t *testing.T) {
	chromium := chromiumtest.Path(t) // opt-in: make render-check
	const n = 30
	url, code := liveRunFixture(t, n, 8*time.Second) // Chromium starts well within it
	connect(t, url).Body.Close()
	dir := t.TempDir()
	dom := chromiumtest.Run(t, chromium, dir, "live", "--virtual-time-budget=60000", "--dump-dom", url)
	if c := <-code; c != ExitOK {
		t.Fatalf("replay exit %d", c)
	}
	page := string(dom)
	for _, want := range []string{`<span id="state">(finished)</span>`, fmt.Sprintf(`<b id="done">%d / %d</b>`, n, n), `<b id="failed">0</b>`, "dispatch lag p50"} {
		if !strings.Contains(page, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `<tr id="ttft"><td>TTFT</td><td>-</td>`) || !strings.Contains(page, `<tr id="ttft"><td>TTFT</td><td>`) {
		t.Errorf("no TTFT figures rendered:\n%s", page)
	}
}

// readEvents reads snapshots from the event stream at url until one is
// finished.
func readEvents(t *testing.T, url string) []live.Snapshot {
	t.Helper()
	resp := connect(t, url)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var snaps []live.Snapshot
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var s live.Snapshot
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		snaps = append(snaps, s)
		if s.Finished {
			break
		}
	}
	if len(snaps) == 0 || !snaps[len(snaps)-1].Finished {
		t.Fatalf("%d events, the last not finished (scan: %v)", len(snaps), sc.Err())
	}
	return snaps
}

// A sweep's live page follows its steps on one event stream and says
// finished once the last step ended.
func TestSweepServeUIFollowsSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	srv := sweepMock(t)
	tr := sweepTrace(t, 400, 20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		code <- run([]string{"sweep", tr, "--target", srv.URL(), "--out", filepath.Join(t.TempDir(), "sweep"), "--speed", "1,2",
			"--step-duration", "2s", "--max-client-lag", "1s", "--max-client-cpu", "1", "--serve-ui", addr}, io.Discard, &stderr)
	}()
	snaps := readEvents(t, "http://"+addr+"/events")
	if c := <-code; c != ExitOK {
		t.Fatalf("sweep exit %d\n%s", c, stderr.String())
	}
	last := snaps[len(snaps)-1]
	if !strings.HasPrefix(last.Label, "sweep step 2 ") || last.Done == 0 || last.E2EL.N == 0 {
		t.Errorf("last event: label %q, done %d, e2el %+v", last.Label, last.Done, last.E2EL)
	}
	if !strings.Contains(stderr.String(), "step 1 speed 1x") {
		t.Errorf("the progress lines are gone with only --serve-ui:\n%s", stderr.String())
	}
}
