package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// The dashboard of a capture: the calls recorded, in flight and failed
// with their kinds, the latency windows and the throughput, and no client
// health (a proxy sends nothing of its own).
func TestCaptureDashboardRenders(t *testing.T) {
	feed := live.NewFeed(8)
	v := live.NewView(feed, live.Sources{Counts: func() live.Counts {
		return live.Counts{Done: 5, Failed: 1, InFlight: 3, Sent: 8, Elapsed: 4 * time.Second}
	}}, live.Options{Label: "capture cap/"})
	for i := range 4 {
		v.Add(live.Sample{DoneNs: int64(3 * time.Second), TTFTNs: int64(30+i) * int64(time.Millisecond), ITLNs: []int64{int64(5 * time.Millisecond)},
			E2ELNs: int64(400 * time.Millisecond), OutputTokens: 20})
	}
	v.Add(live.Sample{DoneNs: int64(3 * time.Second), ErrorKind: "http_status", E2ELNs: int64(time.Millisecond)})
	got := live.Render(v.Snapshot())
	for _, want := range []string{"tracekit capture cap/", "done 5/?", "in flight 3", "failed 1", "failures: http_status 1",
		"last 10s: 5 done, 1 failed", "TTFT", "ITL", "E2EL", "20 output tok/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "dispatch lag") {
		t.Errorf("a capture's dashboard shows client health:\n%s", got)
	}
}

// The live page's event stream during a real capture in front of the
// mock: an event counts the calls recorded while the proxy still runs,
// and after SIGTERM a last one, marked finished, counts each call, the
// failed one by kind, with latency windows from the recorders' tap.
func TestCaptureServeUIEvents(t *testing.T) {
	up := mocktest.Start(t, func(c *mock.Config) { c.Latency.OutputMean = 6 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(tracekitBinary(t), "capture", "--listen", "127.0.0.1:0", "--upstream", up.URL(), "--out", t.TempDir(),
		"--serve-ui", addr, "--progress", "dashboard")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	urls := make(chan string, 1)
	var log strings.Builder
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		re := regexp.MustCompile(`^capture: (http://\S+) ->`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(60 * time.Second): // hang guard, not a budget
		t.Fatal("capture printed no URL")
	}
	const n = 6 // the last fails
	for i := range n {
		body := fmt.Sprintf(`{"model":"tracekit-mock","messages":[{"role":"user","content":"q%d"}],"stream":true}`, i)
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if i == n-1 {
			req.Header.Set(mock.FaultHeader, "status=500")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	resp := connect(t, "http://"+addr+"/events")
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	next := func() (live.Snapshot, bool) {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var s live.Snapshot
				if err := json.Unmarshal([]byte(data), &s); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				return s, true
			}
		}
		return live.Snapshot{}, false
	}
	// While the proxy runs, the events come to count every call (each
	// is recorded once its recorder wrote it); the stream itself bounds
	// the wait, and the process is killed by the deadline below.
	hang := time.AfterFunc(120*time.Second, func() { cmd.Process.Kill() }) // hang guard, not a budget
	defer hang.Stop()
	var running live.Snapshot
	for {
		s, ok := next()
		if !ok {
			t.Fatalf("the event stream ended before counting %d calls (scan: %v)\n%s", n, sc.Err(), log.String())
		}
		if s.Finished {
			t.Fatalf("finished before the signal: %+v", s)
		}
		if s.Done == n {
			running = s
			break
		}
	}
	if running.Failed != 1 || running.InFlight != 0 || !strings.HasPrefix(running.Label, "capture ") {
		t.Errorf("running event: failed %d, in flight %d, label %q", running.Failed, running.InFlight, running.Label)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var last live.Snapshot
	for {
		s, ok := next()
		if !ok {
			t.Fatalf("the event stream ended without a finished event (scan: %v)\n%s", sc.Err(), log.String())
		}
		if s.Finished {
			last = s
			break
		}
	}
	<-logDone
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != ExitOK {
		t.Fatalf("capture exit %d\n%s", code, log.String())
	}
	if last.Done != n || last.Failed != 1 || last.FailedByKind["http_status"] != 1 || last.InFlight != 0 {
		t.Errorf("last event: done %d failed %d (%v) in flight %d", last.Done, last.Failed, last.FailedByKind, last.InFlight)
	}
	if last.TTFT.N != n-1 || last.E2EL.N != n-1 || last.ITL.N == 0 || last.TTFT.P50Ms <= 0 || last.OutputTokPerS <= 0 {
		t.Errorf("last event lacks the windows: ttft %+v itl %+v e2el %+v, %.1f tok/s", last.TTFT, last.ITL, last.E2EL, last.OutputTokPerS)
	}
	if last.Health.Cores != 0 {
		t.Errorf("a capture reports client health %+v", last.Health)
	}
	if !strings.Contains(log.String(), "live page: http://"+addr) || !strings.Contains(log.String(), "stderr is not a terminal") {
		t.Errorf("stderr lacks the page's address or the dashboard's fallback:\n%s", log.String())
	}
}
