package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// The soak (make soak, not part of make bench): a long multi-turn replay
// against a mock in a child process that injects 1% faults and closes
// keep-alive connections idle for 5 s, as uvicorn does. It proves two
// things: the client does not grow (RSS, goroutines and open descriptors,
// sampled every soakSample right after a forced garbage collection, are
// flat after the warm-up), and it invents no
// error (every recorded error is a fault the mock's log says it injected,
// and every request the mock saw is in the recording exactly once).
const (
	soakSample = 10 * time.Second
	// soakWarm is the share of the samples, from the start, left out as
	// warm-up, and soakWarmMin the least time: the conversations in
	// progress, their histories (the heap), the connection pool and the
	// goroutines climb to their working level there, which is no leak. The
	// soak's conversations (4-12 turns, 4 s think times) last about a
	// minute, so the number in progress and their histories' lengths level
	// off within two.
	soakWarm    = 0.25
	soakWarmMin = 2 * time.Minute
	// soakSlope: after the warm-up, the least-squares slope of a quantity
	// may be at most this fraction of its mean per hour; it counts as a
	// climb only once it exceeds that by twice its standard error (widened
	// for noise that lasts from one sample to the next, as the requests in
	// flight do), so the noise of a short soak is not taken for a leak.
	soakSlope = 0.10
	// soakFaults are the mock's drawn faults, 1% in all.
	soakFaults = "--fault-503 0.0025 --fault-disconnect 0.0025 --fault-reset 0.0025 --fault-nodone 0.0025"
)

// sample is one reading of the replaying process (this one).
type sample struct {
	At         time.Duration
	RSSBytes   int64
	Goroutines int
	FDs        int
	InFlight   int64
	Done       int64
}

func readSample(at time.Duration, st replay.Stats) sample {
	s := sample{At: at, Goroutines: runtime.NumGoroutine(), InFlight: st.InFlight, Done: st.Done}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.FDs = len(ents)
	}
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				s.RSSBytes = kb << 10
			}
		}
		f.Close()
	}
	return s
}

// soakMock is the mock child process.
type soakMock struct {
	cmd *exec.Cmd
	url string
	log string
}

func startSoakMock(ctx context.Context, e *env) (*soakMock, error) {
	ready := filepath.Join(e.work, "soak-mock.ready")
	m := &soakMock{log: filepath.Join(e.work, "soak-truth.parquet")}
	args := append([]string{"mock", "--listen", "127.0.0.1:0", "--ready-file", ready, "--seed", "1",
		"--idle-close", "5s", "--decode-base", "8ms", "--prefill-base", "20ms", "--emit-log", m.log},
		strings.Fields(soakFaults)...)
	m.cmd = exec.Command(e.bin, args...)
	m.cmd.Stderr = os.Stderr
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(ready)
		if err != nil {
			continue
		}
		var r struct{ URL string }
		if err := json.Unmarshal(b, &r); err != nil || r.URL == "" {
			return nil, fmt.Errorf("mock ready file %s: %q", ready, b)
		}
		m.url = r.URL
		return m, nil
	}
	m.cmd.Process.Kill()
	m.cmd.Wait()
	return nil, errors.New("the mock did not write its ready file within 30 s")
}

// stop ends the mock with SIGINT (which completes its log) and reads it.
func (m *soakMock) stop() ([]mock.LogEntry, error) {
	m.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		m.cmd.Process.Kill()
		<-done
		return nil, errors.New("the mock did not exit within 60 s of SIGINT")
	}
	entries, _, err := mock.ReadLog(m.log)
	return entries, err
}

// soak runs the whole thing for d and returns its figures.
func soak(ctx context.Context, e *env, d time.Duration) ([]figure, error) {
	const sec = "soak (make soak: multi-turn replay, 1% faults, idle close 5 s)"
	tr := filepath.Join(e.work, "soak-trace.parquet")
	// Think times around the server's 5 s idle close, so that stale
	// keep-alive connections are met all the time; enough conversations
	// that the trace outlasts the soak.
	synth := []string{"synth", "--conversations", strconv.Itoa(int(d.Seconds()) * 3), "--turns", "4-12",
		"--input-tokens", "100-400", "--output-tokens", "20-80", "--rate", "3",
		"--think-time", "exponential:mean=4s", "--seed", "1", "-o", tr}
	if out, err := exec.CommandContext(ctx, e.bin, synth...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("synth: %v\n%s", err, out)
	}
	m, err := startSoakMock(ctx, e)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(e.work, "soak-recording.parquet")
	var rec *record.Recorder
	var samples []sample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	began := time.Now()
	// The recording and the sampler start once the mock passed the run's
	// ready check and probe.
	open := func(runner *replay.Runner) (record.Sink, error) {
		var err error
		if rec, err = record.NewRecorder(out, trace.RunMeta{TracekitVersion: trace.Version, Targets: []string{m.url}}, record.RecorderOptions{}); err != nil {
			return nil, err
		}
		go func() {
			defer close(sampled)
			t := time.NewTicker(soakSample)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					// Without it RSS follows the collector's pacing, not
					// what is live: the heap grows to twice the live set
					// between collections (the runtime forces one only
					// every 2 minutes), a climb of minutes that is no leak.
					runtime.GC()
					s := readSample(time.Since(began), runner.Stats())
					samples = append(samples, s)
					e.logf("soak %v: rss %d MiB, %d goroutines, %d fds, %d in flight, %d done",
						s.At.Round(time.Second), s.RSSBytes>>20, s.Goroutines, s.FDs, s.InFlight, s.Done)
				}
			}
		}()
		return rec, nil
	}
	res, runErr := replay.Record(ctx, replay.Config{Trace: tr, Targets: []string{m.url}, Duration: d,
		IdleTimeout: 30 * time.Second, ReadyTimeout: 30 * time.Second, Command: "soak"}, nil, open)
	close(stop)
	var closeErr error
	if rec != nil {
		<-sampled
		closeErr = rec.Close()
	}
	log, logErr := m.stop()
	if err := errors.Join(runErr, closeErr, logErr); err != nil {
		return nil, err
	}
	recs, _, err := trace.ReadRecords(out)
	if err != nil {
		return nil, err
	}
	figs := []figure{}
	cmd := "make soak   # go run ./bench -soak " + d.String() + " -o BENCHMARKS.md -bin bin/tracekit"
	add := func(name, value, goal, verdict, note string) {
		figs = append(figs, figure{Section: sec, Name: name, Value: value, Goal: goal, Verdict: verdict, Command: cmd, Note: note})
	}
	j := joinSoak(recs, log)
	add("requests", fmt.Sprintf("%d recorded in %v (%d retried on a fresh connection), %d in the mock's log; %d faults injected", len(recs), d, j.retried, len(log), j.faults), "", "", "")
	verdict := "met"
	if j.falseErrors > 0 || j.duplicates > 0 || j.missing > 0 {
		verdict = fmt.Sprintf("**missed**: %d false errors, %d requests seen twice by the mock, %d in the mock's log but not recorded", j.falseErrors, j.duplicates, j.missing)
	}
	add("errors not caused by an injected fault", strconv.Itoa(j.falseErrors), "0, and every request the mock saw recorded exactly once", verdict, strings.Join(j.examples, "; "))
	warm := warmUp(samples)
	for _, q := range []struct {
		name string
		v    func(sample) float64
		unit string
	}{
		{"RSS", func(s sample) float64 { return float64(s.RSSBytes) / (1 << 20) }, "MiB"},
		{"goroutines", func(s sample) float64 { return float64(s.Goroutines) }, ""},
		{"open file descriptors", func(s sample) float64 { return float64(s.FDs) }, ""},
	} {
		value, verdict := flatness(samples, q.v, q.unit)
		add(q.name+" after the warm-up", value, fmt.Sprintf("flat: least-squares slope at most %.0f%% of the mean per hour (beyond twice its standard error)", soakSlope*100), verdict,
			fmt.Sprintf("%d samples every %v, each right after a forced garbage collection (so RSS follows the live heap, not the collector's pacing), the first %d (warm-up) left out; in flight is a random process, so goroutines and descriptors follow it", len(samples), soakSample, warm))
	}
	_ = res
	return figs, nil
}

// warmUp is how many of the samples are warm-up: soakWarm of them, and at
// least those of the first soakWarmMin, and one.
func warmUp(xs []sample) int {
	n := max(1, int(math.Ceil(soakWarm*float64(len(xs)))))
	for n < len(xs) && xs[n].At <= soakWarmMin {
		n++
	}
	return min(n, len(xs))
}

// flatness judges whether v stays flat over the samples after the
// warm-up by its least-squares slope: a leak is a climb that goes on, while
// a climb that stops (the warm-up) or noise around a level is not one.
func flatness(samples []sample, v func(sample) float64, unit string) (string, string) {
	xs := samples[warmUp(samples):]
	if len(xs) < 3 {
		return fmt.Sprintf("%d samples after the warm-up: too few", len(xs)), "**missed**: too few samples"
	}
	slope, se, mean := fitSlope(xs, v)
	lo, hi := v(xs[0]), v(xs[0])
	for _, x := range xs {
		lo, hi = min(lo, v(x)), max(hi, v(x))
	}
	limit := soakSlope * mean
	value := fmt.Sprintf("slope %+.1f%s/h ± %.1f (%+.1f%% of the mean %.0f%s per hour) over %v, range %.0f-%.0f",
		slope, unit, se, 100*slope/mean, mean, unit, (xs[len(xs)-1].At - xs[0].At).Round(time.Second), lo, hi)
	if slope-2*se > limit {
		return value, fmt.Sprintf("**missed**: climbs %.1f%s/h, above %.1f%s/h", slope, unit, limit, unit)
	}
	return value, "met"
}

// fitSlope fits v = a + b t by least squares over xs (t in hours) and
// returns b, its standard error and the mean of v.
func fitSlope(xs []sample, v func(sample) float64) (slope, se, mean float64) {
	n := float64(len(xs))
	var tm float64
	for _, x := range xs {
		tm += x.At.Hours()
		mean += v(x)
	}
	tm, mean = tm/n, mean/n
	var stt, sty float64
	for _, x := range xs {
		dt := x.At.Hours() - tm
		stt += dt * dt
		sty += dt * (v(x) - mean)
	}
	if stt == 0 {
		return 0, math.Inf(1), mean
	}
	slope = sty / stt
	res := make([]float64, len(xs))
	var rss, lag float64 // residual sum of squares; of products with the previous residual
	for i, x := range xs {
		res[i] = v(x) - mean - slope*(x.At.Hours()-tm)
		rss += res[i] * res[i]
		if i > 0 {
			lag += res[i] * res[i-1]
		}
	}
	se = math.Sqrt(rss / (n - 2) / stt)
	// Residuals that persist from sample to sample (lag-1 correlation rho)
	// carry fewer independent readings than samples: widen the error by
	// sqrt((1 + rho) / (1 - rho)), rho at most 0.9.
	if rss > 0 {
		if rho := min(lag/rss, 0.9); rho > 0 {
			se *= math.Sqrt((1 + rho) / (1 - rho))
		}
	}
	return slope, se, mean
}

// soakJoin is the recording matched against the mock's ground truth.
type soakJoin struct {
	faults, retried, falseErrors, duplicates, missing int
	examples                                          []string
}

func joinSoak(recs []trace.Record, log []mock.LogEntry) soakJoin {
	var j soakJoin
	seen := map[string]int{}
	fault := map[string]string{}
	for _, l := range log {
		seen[l.RequestID]++
		if l.Fault != "" {
			fault[l.RequestID] = l.Fault
			j.faults++
		}
	}
	recorded := map[string]bool{}
	for _, r := range recs {
		recorded[r.RequestID] = true
		if r.Attempt > 0 {
			// A retry (id ID-1) was sent because its first attempt (ID-0)
			// met a closed connection before any response byte; when the
			// server did read that attempt (the mock's reset fault on a
			// reused connection), the log holds it too.
			j.retried++
			recorded[strings.TrimSuffix(r.RequestID, "1")+"0"] = true
		}
		// A request cut by the end of the run is not the server's error.
		if r.ErrorKind == "" || r.ErrorKind == trace.ErrCanceled {
			continue
		}
		if fault[r.RequestID] == "" {
			j.falseErrors++
			if len(j.examples) < 3 {
				j.examples = append(j.examples, fmt.Sprintf("%s %s: %s", r.RequestID, r.ErrorKind, r.ErrorMessage))
			}
		}
	}
	for id, n := range seen {
		// Requests without an X-Request-Id (replay's probe before the
		// clock) get an id from the mock: they are not traffic.
		if strings.HasPrefix(id, "mock-") {
			continue
		}
		if n > 1 {
			j.duplicates++
		}
		if !recorded[id] {
			j.missing++
			if len(j.examples) < 6 {
				j.examples = append(j.examples, "not recorded: "+id)
			}
		}
	}
	slices.Sort(j.examples)
	return j
}

// spliceSoak puts the soak's section into an existing BENCHMARKS.md between
// soakBegin and soakEnd (appended the first time), so make bench and make
// soak each rewrite only their own part.
const (
	soakBegin = "<!-- soak:begin (make soak rewrites this part) -->"
	soakEnd   = "<!-- soak:end -->"
)

func spliceSoak(doc, section string) string {
	block := soakBegin + "\n" + section + soakEnd + "\n"
	i, k := strings.Index(doc, soakBegin), strings.Index(doc, soakEnd)
	if i < 0 || k < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + block
	}
	return doc[:i] + block + strings.TrimLeft(doc[k+len(soakEnd):], "\n")
}

// keptSoak returns the soak block of an existing file, for make bench to
// carry over.
func keptSoak(doc string) string {
	i, k := strings.Index(doc, soakBegin), strings.Index(doc, soakEnd)
	if i < 0 || k < i {
		return ""
	}
	return doc[i : k+len(soakEnd)]
}
