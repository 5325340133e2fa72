package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/sweep"
	"github.com/tracekit/tracekit/trace"
)

// sweepMock starts a small fast mock: 4 slots, 10 tokens at 2 ms.
func sweepMock(t *testing.T) *mock.Server {
	t.Helper()
	c := mock.DefaultConfig()
	c.Latency = mock.Latency{PrefillBase: mock.Duration(2 * time.Millisecond), DecodeBase: mock.Duration(2 * time.Millisecond),
		TokensPerEvent: 1, MaxNumSeqs: 4, OutputMean: 10, MaxModelLen: 1 << 16}
	srv := mocktest.StartConfig(t, c)
	return srv
}

// sweepTrace writes n one-turn conversations at rate per second.
func sweepTrace(t *testing.T, n int, rate float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.parquet")
	gap := int64(float64(time.Second) / rate)
	turns := make([]trace.Turn, n)
	for i := range turns {
		id := fmt.Sprintf("s%03d", i)
		turns[i] = trace.Turn{ConversationID: id, StartOffsetNs: int64(i) * gap, ArrivalOffsetNs: int64(i) * gap,
			Messages: []trace.Message{{Role: "user", Content: "sweep " + id, Tokens: 3}}, InputTokens: 3, OutputTokens: 10}
	}
	if err := trace.WriteTrace(path, trace.TraceMeta{TracekitVersion: trace.Version, Source: "test", Tokenizer: "o200k_base"}, turns); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad flags exit 2 with a message naming the flag; an output directory
// holding a sweep is refused.
func TestSweepBadFlagsExit2(t *testing.T) {
	tr := sweepTrace(t, 5, 10)
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, sweep.SummaryJSON), []byte("{}"), 0o644)
	base := []string{"sweep", tr, "--target", "http://127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "o")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "name the load axis"},
		{[]string{"--speed", "fast"}, "--speed"},
		{[]string{"--speed", "search"}, "--speed: a search needs --slo"},
		{[]string{"--speed", "1,2", "--rate", "3"}, "--speed and --rate"},
		{[]string{"--speed", "1,2", "--max-concurrency", "1,2"}, "both sweep an axis"},
		{[]string{"--search", "speed:4-2", "--slo", "ttft:p99:1s"}, "--search"},
		{[]string{"--search", "speed", "--speed", "1", "--slo", "ttft:p99:1s"}, "both name the speed axis"},
		{[]string{"--speed", "1,2", "--slo", "ttft:99:1s"}, "--slo"},
		{[]string{"--speed", "1,2", "--goodput-target", "1.5", "--slo", "ttft:p99:1s"}, "--goodput-target"},
		{[]string{"--speed", "1,2", "--goodput-target", "0.9"}, "--goodput-target: needs --slo"},
		{[]string{"--speed", "1,2", "--resolution", "0"}, "--resolution"},
		{[]string{"--speed", "1,2", "--step-requests", "5", "--step-duration", "1s"}, "--step-requests and --step-duration"},
		{[]string{"--max-concurrency", "1.5,2"}, "--max-concurrency"},
		{[]string{"--speed", "1,2", "--out", used}, "--out " + used + " already holds a sweep"},
	} {
		_, stderr, code := runCLI(t, append(append([]string(nil), base...), c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
	_, stderr, code := runCLI(t, "sweep", filepath.Join(t.TempDir(), "missing.parquet"), "--target", "http://127.0.0.1:1", "--out", t.TempDir(), "--speed", "1")
	if code != ExitUsage || !strings.Contains(stderr, "missing.parquet") {
		t.Errorf("missing trace: exit %d, %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "sweep", "compare", "a"); code != ExitUsage || !strings.Contains(stderr, "arg") {
		t.Errorf("compare with one argument: exit %d, %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "sweep", "compare", t.TempDir(), t.TempDir()); code != ExitUsage || !strings.Contains(stderr, "sweep.json") {
		t.Errorf("compare of directories without a sweep: exit %d, %q", code, stderr)
	}
}

// A target nobody listens on exits 1 before any step, naming it.
func TestSweepUnreachableExit1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := filepath.Join(t.TempDir(), "o")
	_, stderr, code := runCLI(t, "sweep", sweepTrace(t, 5, 10), "--target", "http://"+addr, "--out", out, "--speed", "1,2")
	if code != ExitFailed || !strings.Contains(stderr, "unreachable") || !strings.Contains(stderr, addr) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if steps, _ := filepath.Glob(filepath.Join(out, "step-*")); len(steps) != 0 {
		t.Errorf("files left for an unreachable target: %v", steps)
	}
}

// A ladder against the mock writes one analyzable recording and report per
// step, the summary in four forms (the Parquet rows read back), prints the
// table, reports progress on stderr; compare reads two sweeps.
func TestSweepLadderFiles(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	srv := sweepMock(t)
	tr := sweepTrace(t, 40, 20)
	out := filepath.Join(t.TempDir(), "sweep")
	args := []string{"sweep", tr, "--target", srv.URL(), "--out", out, "--speed", "1,2", "--step-requests", "20", "--warmup", "2",
		"--slo", "ttft:p99:2s tpot:p90:1s", "--ignore-eos", "--max-client-lag", "1s", "--max-client-cpu", "1", "--progress-every", "100ms", "--seed", "3", "--slices", "250ms"}
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"step 1 (ladder 1/2): speed 1x (20 conversations/s)", "step 2 speed 2x: PASS"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, want := range []string{"speed 1x", "speed 2x", "answer:   speed 2x = 40 conversations/s", "no load run failed", "knee:", "sweep.html"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"step-01-speed-1.parquet", "step-01-speed-1.html", "step-02-speed-2.parquet", "step-02-speed-2.html",
		sweep.SummaryJSON, sweep.SummaryParquet, sweep.SummaryHTML, sweep.SummaryText} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// Every file gets the mode a plain create gives (0644 under umask 022),
	// the summary as well as the recordings.
	plain := filepath.Join(t.TempDir(), "plain")
	if f, err := os.Create(plain); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	pfi, _ := os.Stat(plain)
	files, _ := os.ReadDir(out)
	for _, e := range files {
		if fi, err := e.Info(); err != nil {
			t.Error(err)
		} else if fi.Mode() != pfi.Mode() {
			t.Errorf("%s: mode %v, want %v as os.Create gives", e.Name(), fi.Mode(), pfi.Mode())
		}
	}
	// Each step is a normal recording: analyze reads it.
	if o, e, code := runCLI(t, "analyze", filepath.Join(out, "step-02-speed-2.parquet")); code != ExitOK || !strings.Contains(o, "Successful requests:") {
		t.Errorf("analyze of a step: exit %d\n%s%s", code, o, e)
	}
	recs, meta, err := trace.ReadRecords(filepath.Join(out, "step-02-speed-2.parquet"))
	if err != nil || len(recs) != 22 || meta.Config["speed"] != 2.0 || meta.Config["seed"] != 3.0 || !strings.Contains(meta.Command, "[sweep step 2: speed 2x]") {
		t.Errorf("step 2 recording: %d records, config speed %v seed %v, command %q, %v", len(recs), meta.Config["speed"], meta.Config["seed"], meta.Command, err)
	}
	rows, err := sweep.ReadRows(filepath.Join(out, sweep.SummaryParquet))
	if err != nil || len(rows) != 2 {
		t.Fatalf("sweep.parquet: %d rows, %v", len(rows), err)
	}
	r := rows[1]
	if r.Step != 2 || r.Axis != "speed" || r.Load != 2 || r.Requests != 20 || r.Completed != 20 || !r.Pass || r.Verdict != "pass" ||
		r.Recording != "step-02-speed-2.parquet" || r.Report != "step-02-speed-2.html" || len(r.Checks) != 2 || !r.Checks[0].Met ||
		r.P99TTFTms <= 0 || r.Throughput <= 0 || r.OfferedConvRate != 40 || r.DispatchLagP99ms < 0 || !r.Answer {
		t.Errorf("row 2: %+v", r)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil || len(s.Steps) != 2 || s.Info.TraceRate != 20 || s.Answer == nil || s.Answer.Lower != 2 {
		t.Fatalf("sweep.json: %+v %v", s, err)
	}
	// Each step has its steady window and its 250 ms slices, which hold
	// every request it sent (the 2 warm-up requests are not analyzed).
	for _, st := range s.Steps {
		sent := 0
		for _, w := range st.Slices {
			sent += w.Sent
		}
		if st.Steady == nil || st.Steady.PeakInFlight < 1 || len(st.Slices) == 0 || sent != st.Requests ||
			(st.ThroughputFrom != "steady" && st.ThroughputFrom != "p10-p90") {
			t.Errorf("step %d: steady %+v, %d slices holding %d of %d requests, throughput from %q", st.Index, st.Steady, len(st.Slices), sent, st.Requests, st.ThroughputFrom)
		}
	}
	page, _ := os.ReadFile(filepath.Join(out, sweep.SummaryHTML))
	for _, want := range []string{`<svg class="chart" id="throughput"`, `id="ttft"`, `id="tpot"`, `id="itl"`, `id="goodput"`,
		`href="step-01-speed-1.html"`, `href="step-02-speed-2.parquet"`, "knee: step", "SLO answer: step 2", "SLO ttft:p99:2s"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("sweep.html lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "src=", "<link", "@import"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("sweep.html fetches something: %q", bad)
		}
	}

	// compare: the same sweep against itself is unchanged.
	out2 := filepath.Join(t.TempDir(), "sweep2")
	args[5] = out2
	if _, e, code := runCLI(t, args...); code != ExitOK {
		t.Fatalf("second sweep: exit %d %s", code, e)
	}
	htmlPath := filepath.Join(t.TempDir(), "cmp.html")
	cmp, e, code := runCLI(t, "sweep", "compare", out, out2, "--html", htmlPath)
	if code != ExitOK || !strings.Contains(cmp, "SLO answer (speed)") || !strings.Contains(cmp, "+0.0%") || !strings.Contains(cmp, "== B: "+out2) {
		t.Errorf("compare: exit %d\n%s%s", code, cmp, e)
	}
	if page, err := os.ReadFile(htmlPath); err != nil || !bytes.Contains(page, []byte("B throughput")) || !bytes.Contains(page, []byte(sweep.SummaryHTML)) {
		t.Errorf("compare html: %v", err)
	}
	if fi, err := os.Stat(htmlPath); err != nil {
		t.Error(err)
	} else if fi.Mode() != pfi.Mode() {
		t.Errorf("compare html: mode %v, want %v", fi.Mode(), pfi.Mode())
	}
	// tracekit compare takes the two sweep directories too.
	if top, e, code := runCLI(t, "compare", out, out2); code != ExitOK || top != cmp {
		t.Errorf("tracekit compare of two sweep directories: exit %d, %s\n%s\nwant the output of sweep compare:\n%s", code, e, top, cmp)
	}
}

// With a client-lag limit no run can meet, every step is marked distorted,
// none is the answer, and the sweep exits 3: the client could not measure.
func TestSweepDistortedStepsAreMarked(t *testing.T) {
	srv := sweepMock(t)
	out := filepath.Join(t.TempDir(), "sweep")
	stdout, stderr, code := runCLI(t, "sweep", sweepTrace(t, 30, 20), "--target", srv.URL(), "--out", out, "--speed", "1,2",
		"--step-requests", "10", "--slo", "ttft:p99:5s", "--max-client-lag", "1ns", "--retry-distorted", "0")
	if code != 3 || !strings.Contains(stderr, "could not measure faithfully") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Steps {
		if !r.Distorted || r.Pass || r.Verdict != sweep.VerdictDistorted || len(r.Distortions) == 0 || len(r.Reasons) != 0 {
			t.Errorf("step %d: distorted %v pass %v verdict %q distortions %q reasons %q", r.Index, r.Distorted, r.Pass, r.Verdict, r.Distortions, r.Reasons)
		}
	}
	if len(s.Steps) != 2 || s.Answer == nil || s.Answer.Found || !strings.Contains(stdout, "DISTORTED") {
		t.Errorf("steps %d, answer %+v\n%s", len(s.Steps), s.Answer, stdout)
	}
}

// A search whose every request met the SLO on a client whose own health
// check failed (forced through the real path: a client-lag limit no run
// can meet) has no answer: the client could not measure faithfully, exit
// 3, and the answer names the health figure, once; it is not "no load met
// the SLO".
func TestSweepSearchUnmeasuredExit3(t *testing.T) {
	srv := sweepMock(t)
	out := filepath.Join(t.TempDir(), "sweep")
	stdout, stderr, code := runCLI(t, "sweep", sweepTrace(t, 30, 20), "--target", srv.URL(), "--out", out, "--search", "speed:1-4",
		"--step-requests", "10", "--slo", "ttft:p99:5s", "--max-client-lag", "1ns", "--retry-distorted", "0", "--progress-every", "1m")
	if code != 3 {
		t.Errorf("exit %d, want 3\n%s\n%s", code, stdout, stderr)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) == 0 {
		t.Fatal("no step")
	}
	for _, r := range s.Steps {
		met := true
		for _, k := range r.Checks {
			met = met && k.Met
		}
		if !r.Distorted || len(r.Distortions) == 0 || r.Errors != 0 || r.Completed != r.Requests || r.Requests == 0 || !met {
			t.Fatalf("step %d: distorted %v %q, %d errors, %d of %d completed, objectives met %v: want every request to meet the SLO on a distorted client",
				r.Index, r.Distorted, r.Distortions, r.Errors, r.Completed, r.Requests, met)
		}
	}
	a := s.Answer
	figure := s.Steps[0].Distortions[0] // e.g. "send delay p99 0.94 ms > 0.00 ms"
	if a == nil || a.Found || !strings.Contains(a.Reason, "the client could not measure faithfully") || !strings.Contains(a.Reason, figure) {
		t.Fatalf("answer %+v; want none, the client could not measure, naming %q", a, figure)
	}
	both := stdout + stderr
	if n := strings.Count(both, a.Reason); n != 1 {
		t.Errorf("the answer's reason is printed %d times, want once:\n%s\n%s", n, stdout, stderr)
	}
	if strings.Contains(both, "no load met the SLO") || !strings.Contains(stdout, "answer:   none: the client could not measure faithfully") ||
		!strings.Contains(stderr, "could not measure faithfully") {
		t.Errorf("output:\n%s\n%s", stdout, stderr)
	}
}

// A target that dies mid-sweep (a real mock on loopback, stopped a few
// requests into step 2, after step 1 passed): the step it broke is not a
// load failure, so it bounds nothing. The sweep stops, exit 1, and
// sweep.json holds no answer (found false, with the reason), not step 1 as
// the highest passing load.
func TestSweepTargetDiesMidSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs sweep steps of seconds")
	}
	srv := sweepMock(t)
	out := filepath.Join(t.TempDir(), "sweep")
	done := make(chan struct{})
	killed := make(chan bool, 1)
	go func() { // stops the mock 5 requests into step 2; gives up when the sweep ends
		base := int64(-1)
		for {
			select {
			case <-done:
				killed <- false
				return
			case <-time.After(2 * time.Millisecond):
			}
			if base < 0 {
				if s, err := sweep.ReadSummary(out); err == nil && len(s.Steps) == 1 {
					base = srv.Stats().Requests
				}
				continue
			}
			if srv.Stats().Requests >= base+5 {
				srv.Close()
				killed <- true
				return
			}
		}
	}()
	stdout, stderr, code := runCLI(t, "sweep", sweepTrace(t, 400, 20), "--target", srv.URL(), "--out", out, "--search", "speed:1-8",
		"--slo", "ttft:p99:5s", "--step-requests", "60", "--max-client-lag", "1s", "--max-client-cpu", "1", "--progress-every", "1m",
		"--idle-timeout", "5s", "--drain-timeout", "5s")
	close(done)
	if !<-killed {
		t.Fatalf("the sweep ended before the mock was stopped in step 2:\n%s\n%s", stdout, stderr)
	}
	if code != ExitFailed {
		t.Errorf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) == 0 || !s.Steps[0].Pass {
		t.Fatalf("step 1 did not pass: %+v", s.Steps)
	}
	for _, r := range s.Steps[1:] {
		if r.Verdict == sweep.VerdictFail {
			t.Errorf("step %d, broken by the dead target, is judged a load failure: %q", r.Index, r.Reasons)
		}
	}
	a := s.Answer
	if a == nil || a.Found || !strings.Contains(a.Reason, "unreachable") || s.Error == "" {
		t.Errorf("answer %+v, error %q; want none, the reason naming the unreachable target", a, s.Error)
	}
	if strings.Contains(stdout, "[answer]") || !strings.Contains(stdout, "answer:   unresolved") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// SIGINT to a real `tracekit sweep` process mid-sweep: exit 130, every
// finished step kept and valid, the summary written with the steps so far.
func TestSweepInterruptKeepsFinishedSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs sweep steps of seconds")
	}
	bin := tracekitBinary(t)
	srv := sweepMock(t)
	out := filepath.Join(t.TempDir(), "sweep")
	cmd := exec.Command(bin, "sweep", sweepTrace(t, 400, 20), "--target", srv.URL(), "--out", out, "--speed", "0.5,1,2,4",
		"--step-duration", "3s", "--max-client-lag", "1s", "--max-client-cpu", "1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s, err := sweep.ReadSummary(out); err == nil && len(s.Steps) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no step finished within 60 s:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit within 60 s of SIGINT:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != ExitInterrupted {
		t.Fatalf("exit %d, want 130:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, sweep.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	var s sweep.Summary
	if err := json.Unmarshal(b, &s); err != nil || !s.Interrupted || len(s.Steps) < 1 || len(s.Steps) > 3 {
		t.Fatalf("summary: interrupted %v, %d steps, %v", s.Interrupted, len(s.Steps), err)
	}
	for _, r := range s.Steps {
		if r.Recording == "" && r.Interrupted {
			continue // interrupted before it sent anything
		}
		if _, err := trace.OpenRecording(filepath.Join(out, r.Recording)); err != nil {
			t.Errorf("step %d (%s): %v", r.Index, r.Verdict, err)
		}
	}
	if last := s.Steps[len(s.Steps)-1]; last.Index > 1 && !last.Interrupted {
		t.Errorf("the step running at SIGINT is not marked interrupted: %+v", last)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted:\n%s", stderr.String())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(out, "*.journal")); len(leftovers) != 0 {
		t.Errorf("journals left: %v", leftovers)
	}
}
