package calibrate

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/stamp"
	"github.com/tracekit/tracekit/trace"
)

// childEnv makes this test binary act as `tracekit mock` (the subset of
// flags calibrate passes), so ModeProcess is tested without building the
// command.
const childEnv = "TRACEKIT_CALIBRATE_TEST_MOCK"

func TestMain(m *testing.M) {
	stamp.ObserverMain() // the arrival observer of the steps' kernel-offset replays
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// serveChild mirrors cmd_mock's protocol: URL line on stdout and the
// --ready-file, SIGTERM completes the log and exits.
func serveChild(args []string) int {
	fs := flag.NewFlagSet("mock", flag.ContinueOnError)
	listen := fs.String("listen", "", "")
	cfgPath := fs.String("config", "", "")
	logPath := fs.String("emit-log", "", "")
	readyPath := fs.String("ready-file", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := mock.LoadConfig(*cfgPath, mock.DefaultConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Listen, cfg.LogPath = *listen, *logPath
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	srv, err := mock.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mock.WriteReadyFile(*readyPath, srv.Ready()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("tracekit mock: serving %s on %s\n", cfg.Model, srv.URL())
	select {
	case <-sig:
	case <-time.After(2 * time.Minute): // never outlive a broken parent
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// tinyConfig is a ladder small enough for the race detector.
func tinyConfig(t *testing.T, mode string) Config {
	return Config{
		Streams: []int{10}, EventsPerS: []float64{100}, Rates: []float64{40},
		Duration: 500 * time.Millisecond, MaxError: time.Second,
		Mode: mode, MockCommand: []string{os.Args[0]}, MockEnv: []string{childEnv + "=1"},
		Dir: t.TempDir(), Logf: t.Logf,
	}
}

// TestTinyLadderJoinsEveryEvent runs the whole calibration at a tiny load
// with the mock in this process and in a child, and checks that the join
// paired every event of both sides, that the expected number of events
// flowed, and that the error figures are the offset-corrected diffs of real
// pairs (recomputed here from the files when the child left its log).
func TestTinyLadderJoinsEveryEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	for _, mode := range []string{ModeInProcess, ModeProcess} {
		t.Run(mode, func(t *testing.T) {
			cfg := tinyConfig(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Steps) != 3 {
				t.Fatalf("%d steps, want probe, rate=40, streams=10", len(rep.Steps))
			}
			// Same clock on both sides: the typical difference is small.
			// Its sign depends on the stamp mode: a kernel receive stamp
			// is taken inside the mock's write on loopback, before the
			// mock stamps the write's end.
			if rep.OffsetNs < -int64(20*time.Millisecond) || rep.OffsetNs > int64(20*time.Millisecond) || rep.OffsetNs == 0 {
				t.Errorf("offset %v: expected a loopback transit of microseconds", time.Duration(rep.OffsetNs))
			}
			full, _ := cfg.withDefaults()
			for i, r := range rep.Steps {
				p := size(r.Step, cfg.Duration, r.Step.ITL(), i)
				want := p.requests * (p.maxTokens + 1) // role chunk + one event per token
				if r.Matched != want || r.EventsClient != want || r.EventsServer != want || r.Unmatched != 0 || r.RequestsUnmatched != 0 || r.Errors != 0 {
					t.Errorf("%s: matched %d, client %d, server %d events (want %d each), %d unmatched, %d requests unmatched, %d errors",
						r.Name, r.Matched, r.EventsClient, r.EventsServer, want, r.Unmatched, r.RequestsUnmatched, r.Errors)
				}
				if r.ErrP50Ns != r.RawMedianNs-rep.OffsetNs || r.ErrMinNs > r.ErrP50Ns || r.ErrP50Ns > r.ErrP99Ns || r.ErrP99Ns > r.ErrMaxNs {
					t.Errorf("%s: error quantiles min %d p50 %d p99 %d max %d, raw median %d, offset %d", r.Name, r.ErrMinNs, r.ErrP50Ns, r.ErrP99Ns, r.ErrMaxNs, r.RawMedianNs, rep.OffsetNs)
				}
				if r.ClientRSSBytes <= 0 || r.WallSeconds <= 0 || r.LagMaxNs < r.LagP50Ns {
					t.Errorf("%s: rss %d, wall %g, lag p50 %d max %d", r.Name, r.ClientRSSBytes, r.WallSeconds, r.LagP50Ns, r.LagMaxNs)
				}
				if mode == ModeProcess {
					if r.MockCores <= 0 {
						t.Errorf("%s: no CPU measured for the child mock", r.Name)
					}
					checkAgainstFiles(t, r, rep.OffsetNs, strings.TrimSuffix(r.Recording, ".recording.parquet")+".mock.parquet")
				}
			}
			for _, r := range rep.Steps {
				checkSteady(t, r)
			}
			if rep.Steps[0].ErrP50Ns != 0 {
				t.Errorf("probe p50 error %d: the offset is the probe's median, so it must be 0", rep.Steps[0].ErrP50Ns)
			}
			if rep.Faithful == nil || rep.Faithful.Step.Streams != 10 || !strings.Contains(rep.Verdict, "can drive 10 streams") {
				t.Errorf("verdict %q with max error %v", rep.Verdict, full.MaxError)
			}
			var out strings.Builder
			if err := rep.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"shares", "offset removed", "streams=10", "rate=40", "unmatched", "steady state", "whole-step p99"} {
				if !strings.Contains(out.String(), s) && !strings.Contains(out.String(), strings.TrimSuffix(s, "s")) {
					t.Errorf("text report lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

// checkAgainstFiles recomputes a step's error median from its recording and
// the child's log on disk, pairing by request id and event index by hand.
func checkAgainstFiles(t *testing.T, r Result, offset int64, logPath string) {
	t.Helper()
	recs, meta, err := readRecording(r.Recording)
	if err != nil {
		t.Fatal(err)
	}
	log, _, err := mock.ReadLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	server := map[string][]int64{}
	for _, e := range log {
		server[e.RequestID] = e.EventMonoNs
	}
	var diffs []int64
	for _, rec := range recs {
		ev, ok := server[rec.RequestID]
		if !ok || len(ev) != len(rec.EventNs) {
			t.Fatalf("%s: request %s has %d client events, %d logged (found %v)", r.Name, rec.RequestID, len(rec.EventNs), len(ev), ok)
		}
		for i := range ev {
			diffs = append(diffs, meta.StartMonoNs+rec.EventNs[i]-ev[i])
		}
	}
	slices.Sort(diffs)
	if got := diffs[(len(diffs)+1)/2-1] - offset; got != r.ErrP50Ns || len(diffs) != r.Matched {
		t.Errorf("%s: %d pairs with median error %d from the files, report says %d pairs, %d", r.Name, len(diffs), got, r.Matched, r.ErrP50Ns)
	}
	if r.Step.Kind == KindRate {
		return
	}
	// The steady window by hand: from the latest first write to the
	// earliest last write; the events strictly inside it.
	from, to, first := int64(0), int64(1<<63-1), int64(1<<63-1)
	inRecording := map[string]bool{}
	for _, rec := range recs {
		inRecording[rec.RequestID] = true
	}
	for _, e := range log {
		if !inRecording[e.RequestID] {
			continue // replay's pre-run probe request
		}
		from, to, first = max(from, e.EventMonoNs[0]), min(to, e.EventMonoNs[len(e.EventMonoNs)-1]), min(first, e.EventMonoNs[0])
	}
	var steady []int64
	for _, rec := range recs {
		for i, w := range server[rec.RequestID] {
			if from < w && w < to {
				steady = append(steady, meta.StartMonoNs+rec.EventNs[i]-w)
			}
		}
	}
	slices.Sort(steady)
	st := r.Steady
	if st == nil && len(steady) == 0 {
		// The streams never were all open at once (a starved mock or
		// client on a loaded machine): both sides agree there is none.
		t.Logf("%s: no steady window, by hand either", r.Name)
		return
	}
	if st == nil || len(steady) == 0 {
		t.Fatalf("%s: steady state %+v, %d events inside the window by hand", r.Name, st, len(steady))
	}
	if st.Events != len(steady) || st.StartNs != from-first || st.WindowNs != to-from || st.ErrP50Ns != steady[(len(steady)+1)/2-1]-offset || st.ErrMaxNs != steady[len(steady)-1]-offset {
		t.Errorf("%s: steady %+v; by hand %d events, from %d, length %d, p50 %d, max %d", r.Name, *st, len(steady), from-first, to-from,
			steady[(len(steady)+1)/2-1]-offset, steady[len(steady)-1]-offset)
	}
}

// checkSteady: a stream step's steady window lies inside the step and
// holds a part of its events; a rate step has none.
func checkSteady(t *testing.T, r Result) {
	t.Helper()
	st := r.Steady
	if r.Step.Kind == KindRate {
		if st != nil {
			t.Errorf("%s: rate step with a steady state %+v", r.Name, *st)
		}
		return
	}
	if st == nil {
		// Where the mock's log is read (process mode), checkAgainstFiles
		// proves this agrees with the log: no instant had every stream
		// open, which a loaded machine can cause.
		t.Logf("%s: no steady state (the streams never were all open at once)", r.Name)
		return
	}
	// Streams start over min(1s, duration/4) and each lasts about the
	// duration, so every one is open for about 3/4 of it.
	if st.StartNs <= 0 || st.WindowNs <= 0 || time.Duration(st.StartNs+st.WindowNs) > time.Duration(r.WallSeconds*float64(time.Second)) {
		t.Errorf("%s: steady window from %v for %v, the step took %.3fs", r.Name, time.Duration(st.StartNs), time.Duration(st.WindowNs), r.WallSeconds)
	}
	// The client's CPU over the window, sampled during the step: some, at
	// most the machine's cores (and the arrival observer's), the same
	// CPU per event and per second of window.
	if st.ClientCPUPerEventNs <= 0 || st.ClientCores <= 0 || st.ClientCores > float64(runtime.NumCPU()+1) ||
		math.Abs(st.ClientCPUPerEventNs*float64(st.Events)-st.ClientCores*float64(st.WindowNs)) > 1e-6*st.ClientCPUPerEventNs*float64(st.Events) {
		t.Errorf("%s: steady client CPU %g ns per event over %d events, %g cores over %v", r.Name, st.ClientCPUPerEventNs, st.Events, st.ClientCores, time.Duration(st.WindowNs))
	}
	if st.Events <= 0 || st.Events >= r.Matched {
		t.Errorf("%s: %d steady events of %d matched: expected some, not all (the ramp's are left out)", r.Name, st.Events, r.Matched)
	}
	if st.ErrP50Ns > st.ErrP99Ns || st.ErrP99Ns > st.ErrMaxNs || st.ErrMaxNs > r.ErrMaxNs || st.ErrP50Ns < r.ErrMinNs {
		t.Errorf("%s: steady p50 %d p99 %d max %d outside the step's min %d max %d", r.Name, st.ErrP50Ns, st.ErrP99Ns, st.ErrMaxNs, r.ErrMinNs, r.ErrMaxNs)
	}
}

// TestJoinSteadyWindow: the window runs from the latest first write to the
// earliest last write of the step's streams, ends excluded; only the
// events written inside it count, whatever their client stamps; another
// step's entries do not narrow it; at 100 streams and more, one in a
// hundred stragglers at each end does not narrow it either; streams that
// never all overlap have none.
func TestJoinSteadyWindow(t *testing.T) {
	// write times and diffs per stream; the client stamp is write + diff
	// (start 0). Window: (max(1000,1150,1220), min(1400,1550,1520)) =
	// (1220, 1400): a's 1300, b's 1250 and 1350, c's 1320.
	type stream struct {
		id            string
		writes, diffs []int64
	}
	streams := []stream{
		{"cal03-a", []int64{1000, 1100, 1200, 1300, 1400}, []int64{5000, 4000, 3000, 7, 9000}},
		{"cal03-b", []int64{1150, 1250, 1350, 1450, 1550}, []int64{6000, 2, 8, 1000, 1000}},
		{"cal03-c", []int64{1220, 1320, 1420, 1520}, []int64{9999, 5, 3000, 2000}},
	}
	var recs []trace.Record
	log := []mock.LogEntry{{RequestID: "cal04-x", EventMonoNs: []int64{1290, 1291}}} // another step
	for _, s := range streams {
		ev := make([]int64, len(s.writes))
		for i := range ev {
			ev[i] = s.writes[i] + s.diffs[i]
		}
		recs = append(recs, trace.Record{RequestID: s.id, EventNs: ev})
		log = append(log, mock.LogEntry{RequestID: s.id, EventMonoNs: s.writes})
	}
	j := Join(recs, 0, log, "cal03-")
	if want := []int64{2, 5, 7, 8}; !slices.Equal(j.SteadyDiffs, want) {
		t.Errorf("steady diffs %v, want %v", j.SteadyDiffs, want)
	}
	if j.ServerFirstNs != 1000 || j.SteadyFromNs != 1220 || j.SteadyToNs != 1400 || j.SteadyWindowNs() != 180 || j.Matched() != 14 {
		t.Errorf("first %d, window %d..%d (%d), %d matched", j.ServerFirstNs, j.SteadyFromNs, j.SteadyToNs, j.SteadyWindowNs(), j.Matched())
	}
	// The client's CPU: 3 ns a ns, sampled in the client's clock, which
	// runs the step's median diff (2000) ahead of the server's; a bend at
	// 3300 (= 1300 + 2000), inside the shifted window, to show the
	// interpolation between samples: from 3220 (cpu 9660) to 3400 (cpu
	// 9900 + 100*1 = 10000): 340 ns over 180 ns and 4 events.
	if m := quantile(j.Diffs, 0.5); m != 2000 {
		t.Fatalf("median diff %d, want 2000", m)
	}
	cpu := []cpuSample{{0, 0}, {3300, 9900}, {10000, 9900 + 6700}}
	st := steadyOf(Step{Kind: KindStreams, Streams: 3}, j, cpu)
	if st == nil || st.StartNs != 220 || st.WindowNs != 180 || st.Events != 4 {
		t.Fatalf("steady %+v, want from 220 for 180 with 4 events", st)
	}
	if math.Abs(st.ClientCPUPerEventNs-340.0/4) > 1e-9 || math.Abs(st.ClientCores-340.0/180) > 1e-9 {
		t.Errorf("steady client CPU %g ns per event, %g cores; want 85, %g", st.ClientCPUPerEventNs, st.ClientCores, 340.0/180)
	}
	// Samples that end before the window: no figure rather than a wrong one.
	if st := steadyOf(Step{Kind: KindStreams, Streams: 3}, j, cpu[:2]); st == nil || st.ClientCPUPerEventNs != 0 || st.ClientCores != 0 {
		t.Errorf("with samples up to 3300 only: steady %+v, want no CPU figures", st)
	}
	// The offset comes off the steady quantiles as off the whole step's.
	rep := &Report{Steps: []Result{
		{Step: Step{Kind: KindProbe}, RawMedianNs: 1, Matched: 1, diffs: []int64{1}},
		{Step: Step{Kind: KindStreams, Streams: 3}, Name: "streams=3", Matched: j.Matched(), diffs: j.Diffs, Steady: st},
	}}
	rep.finish(time.Second)
	if got := rep.Steps[1]; got.Steady.ErrP50Ns != 4 || got.Steady.ErrP99Ns != 7 || got.Steady.ErrMaxNs != 7 || got.ErrMaxNs != 9998 || !got.Pass {
		t.Errorf("after an offset of 1: steady %+v, whole max %d, pass %v", *got.Steady, got.ErrMaxNs, got.Pass)
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "steady state") || !strings.Contains(out.String(), "29%") {
		t.Errorf("text report without the steady table (4 of 14 events = 29%%):\n%s", out.String())
	}

	// 200 streams, two of them stragglers: one began late, one ended
	// early. The window leaves out floor(200/100) = 2 streams at each
	// end: the two latest first writes (the straggler's and one more) and
	// the two earliest last writes.
	log = nil
	recs = nil
	for i := range 200 {
		first, last := int64(1000+i), int64(5000-i)
		switch i {
		case 7:
			first = 4900 // began late
		case 8:
			last = 1050 // ended early
		}
		id := fmt.Sprintf("cal05-%d", i)
		log = append(log, mock.LogEntry{RequestID: id, EventMonoNs: []int64{first, last}})
		recs = append(recs, trace.Record{RequestID: id, EventNs: []int64{first, last}})
	}
	j = Join(recs, 0, log, "cal05-")
	// Latest firsts: 4900, 1199, 1198: the 3rd is 1198. Earliest lasts:
	// 1050, 4801, 4802: the 3rd is 4802.
	if j.SteadyFromNs != 1198 || j.SteadyToNs != 4802 || j.ServerFirstNs != 1000 {
		t.Errorf("with stragglers: first %d, window %d..%d, want 1000, 1198..4802", j.ServerFirstNs, j.SteadyFromNs, j.SteadyToNs)
	}

	// Short requests one after another: no moment with all open.
	short := []mock.LogEntry{{RequestID: "r-1", EventMonoNs: []int64{10, 20}}, {RequestID: "r-2", EventMonoNs: []int64{30, 40}}}
	j = Join([]trace.Record{{RequestID: "r-1", EventNs: []int64{11, 21}}, {RequestID: "r-2", EventNs: []int64{31, 41}}}, 0, short, "r-")
	if j.SteadyWindowNs() != 0 || len(j.SteadyDiffs) != 0 || steadyOf(Step{Kind: KindStreams}, j, nil) != nil {
		t.Errorf("non-overlapping requests: window %d, %d steady diffs", j.SteadyWindowNs(), len(j.SteadyDiffs))
	}
}

// TestJoinCountsUnmatched: records and log entries without a partner, and
// events past the shorter side, are counted; other steps' entries are
// ignored; diffs are stamp + run start - write time.
func TestJoinCountsUnmatched(t *testing.T) {
	recs := []trace.Record{
		{RequestID: "cal01-a-0-0", EventNs: []int64{100, 200, 300}},
		{RequestID: "cal01-b-0-0", EventNs: []int64{100, 200}, ErrorKind: trace.ErrStreamTruncated},
		{RequestID: "cal01-c-0-0", EventNs: []int64{50}}, // not logged
	}
	log := []mock.LogEntry{
		{RequestID: "cal01-a-0-0", EventMonoNs: []int64{1090, 1180, 1270}},
		{RequestID: "cal01-b-0-0", EventMonoNs: []int64{1095, 1195, 1295}}, // one event more than recorded
		{RequestID: "cal01-d-0-0", EventMonoNs: []int64{1, 2}},             // never recorded
		{RequestID: "cal02-a-0-0", EventMonoNs: []int64{1, 2, 3}},          // another step
	}
	j := Join(recs, 1000, log, "cal01-")
	if want := []int64{5, 5, 10, 20, 30}; !slices.Equal(j.Diffs, want) {
		t.Errorf("diffs %v, want %v", j.Diffs, want)
	}
	if j.Unmatched != 1+1+2 || j.RequestsUnmatched != 2 || j.Errors != 1 || j.EventsClient != 6 || j.EventsServer != 8 || j.Requests != 3 {
		t.Errorf("unmatched %d events %d requests, errors %d, client %d server %d requests %d", j.Unmatched, j.RequestsUnmatched, j.Errors, j.EventsClient, j.EventsServer, j.Requests)
	}
	if q := quantile(j.Diffs, 0.5); q != 10 {
		t.Errorf("median %d, want 10", q)
	}
}

// TestTargetWaitsForTheLog runs against a mock started apart (as with
// --target): calibrate cannot read the log until that mock stops, so the
// test stops it when calibrate says it is waiting.
func TestTargetWaitsForTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	dir := t.TempDir()
	mc := mock.DefaultConfig()
	mc.Latency = mock.Latency{PrefillBase: mock.Duration(10 * time.Millisecond), DecodeBase: mock.Duration(10 * time.Millisecond),
		TokensPerEvent: 1, MaxNumSeqs: 256, OutputMean: 1, MaxModelLen: 1 << 20}
	mc.LogPath = filepath.Join(dir, "truth.parquet")
	srv := mocktest.StartConfig(t, mc)
	cfg := Config{Streams: []int{8}, Duration: 300 * time.Millisecond, MaxError: time.Second,
		Target: srv.URL(), MockLog: mc.LogPath, TargetITL: 10 * time.Millisecond, LogWait: 30 * time.Second, Dir: dir,
		Logf: func(f string, a ...any) {
			if strings.HasPrefix(f, "waiting") {
				srv.Close()
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "target" || len(rep.Steps) != 2 {
		t.Fatalf("mode %s, %d steps", rep.Mode, len(rep.Steps))
	}
	for _, r := range rep.Steps {
		if r.Matched == 0 || r.Unmatched != 0 || r.RequestsUnmatched != 0 {
			t.Errorf("%s: %d matched, %d unmatched, %d requests unmatched (the shared log holds both steps)", r.Name, r.Matched, r.Unmatched, r.RequestsUnmatched)
		}
	}
	if got := rep.Steps[1].Step.EventsPerS; got != 800 {
		t.Errorf("stream step sized at %g events/s, want 8 streams / 10ms = 800", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Streams: []int{}, Mode: ModeInProcess}, "no step: give Streams, Rates, Bursts, Burn, ScrapePairs, LivePairs or Saturated"},
		{Config{Saturated: []int{-3}, Mode: ModeInProcess}, "Saturated value -3"},
		{Config{ClientCPUs: -1, Mode: ModeInProcess}, "ClientCPUs -1: expected a count of CPUs"},
		{Config{ClientCPUs: 1, Mode: ModeInProcess}, "ClientCPUs needs the mock out of this process"},
		{Config{Streams: []int{0}, Mode: ModeInProcess}, "Streams value 0"},
		{Config{Streams: []int{10, 20}, EventsPerS: []float64{1, 2, 3}, Mode: ModeInProcess}, "EventsPerS has 3 values for 2 Streams"},
		{Config{Rates: []float64{-1}, Streams: []int{}, Mode: ModeInProcess}, "Rates value -1"},
		{Config{Mode: "thread"}, "Mode \"thread\""},
		{Config{Mode: ModeProcess}, "needs the tracekit executable"},
		{Config{Target: "http://127.0.0.1:1"}, "Target needs MockLog"},
		{Config{Duration: time.Millisecond, Mode: ModeInProcess}, "Duration 1ms"},
		{Config{Stamps: []string{"sundial"}, Mode: ModeInProcess}, `Stamps value "sundial" (#1): StampMode "sundial": expected one of`},
	} {
		// the library names Config's fields, never calibrate's flags (the
		// mock's own --emit-log says how to start one)
		if err := Validate(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) ||
			strings.Contains(strings.ReplaceAll(err.Error(), "--emit-log", ""), "--") {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestVariationsJoinEveryEvent runs a burst step, a burner step and a
// scrape pair in two stamp modes against child mocks, and checks the
// join (every event paired), the waves' schedule, the scrapes and
// burners, each step's stamp mode as its recording states it, the
// per-mode offsets and the TTFT inflation recomputed from the files.
func TestVariationsJoinEveryEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	cfg := Config{
		Streams: []int{}, Bursts: []int{6}, BurstITL: 40 * time.Millisecond, Burn: []int{6}, Burners: 2, ScrapePairs: []int{6},
		ScrapeInterval: 100 * time.Millisecond, Stamps: []string{"goroutine", "kernel"},
		EventsPerS: []float64{60}, Duration: 400 * time.Millisecond, MaxError: time.Second,
		Mode: ModeProcess, MockCommand: []string{os.Args[0]}, MockEnv: []string{childEnv + "=1"},
		Dir: t.TempDir(), Logf: t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Steps {
		names = append(names, r.Name)
	}
	want := []string{"probe/goroutine", "probe/kernel", "burst=6/goroutine", "burst=6/kernel", "streams=6+burn/goroutine", "streams=6+burn/kernel",
		"streams=6/goroutine", "streams=6/kernel", "streams=6+scrape/goroutine", "streams=6+scrape/kernel"}
	if !slices.Equal(names, want) {
		t.Fatalf("steps %v, want %v", names, want)
	}
	if len(rep.OffsetsNs) != 2 || rep.OffsetsNs["goroutine"] != rep.Steps[0].RawMedianNs || rep.OffsetsNs["kernel"] != rep.Steps[1].RawMedianNs {
		t.Errorf("offsets %v, probes' medians %d %d", rep.OffsetsNs, rep.Steps[0].RawMedianNs, rep.Steps[1].RawMedianNs)
	}
	for i, r := range rep.Steps {
		p := size(r.Step, cfg.Duration, r.Step.ITL(), i)
		n := p.requests * (p.maxTokens + 1)
		if r.Matched != n || r.EventsServer != n || r.Unmatched != 0 || r.Errors != 0 {
			t.Errorf("%s: matched %d, server %d of %d events, %d unmatched, %d errors", r.Name, r.Matched, r.EventsServer, n, r.Unmatched, r.Errors)
		}
		if r.StampMode != r.Step.Stamp {
			t.Errorf("%s: the recording says stamp mode %q", r.Name, r.StampMode)
		}
		if off := rep.OffsetsNs[r.Step.Stamp]; r.ErrP50Ns != r.RawMedianNs-off {
			t.Errorf("%s: error p50 %d, raw median %d, its mode's offset %d", r.Name, r.ErrP50Ns, r.RawMedianNs, off)
		}
		// A scrape times out after the interval (100 ms here), which a
		// loaded machine can exceed: failures are allowed in a scrape
		// step, none outside one, and a scrape step has scraped.
		if got := r.Scrapes > 0; got != r.Step.Scrape || (!r.Step.Scrape && r.ScrapeFailures != 0) {
			t.Errorf("%s: %d scrapes, %d failed", r.Name, r.Scrapes, r.ScrapeFailures)
		} else if r.ScrapeFailures > 0 {
			t.Logf("%s: %d of %d scrapes failed (timed out on a loaded machine?)", r.Name, r.ScrapeFailures, r.Scrapes)
		}
		if (r.Burners == cfg.Burners) != r.Step.Burner {
			t.Errorf("%s: %d burners", r.Name, r.Burners)
		}
		recs, meta, err := readRecording(r.Recording)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Stamps == nil || meta.Stamps.Mode != r.Step.Stamp || (r.Step.Stamp == "kernel") != (meta.Stamps.KernelReads > 0) {
			t.Errorf("%s: run stamps %+v", r.Name, meta.Stamps)
		}
		log, _, err := mock.ReadLog(strings.TrimSuffix(r.Recording, ".recording.parquet") + ".mock.parquet")
		if err != nil {
			t.Fatal(err)
		}
		first := map[string]int64{}
		for _, e := range log {
			first[e.RequestID] = e.EventMonoNs[0]
		}
		var infl []int64
		waves := map[int64]int{}
		for _, rec := range recs {
			infl = append(infl, meta.StartMonoNs+rec.EventNs[0]-first[rec.RequestID])
			waves[rec.IntendedNs]++
		}
		slices.Sort(infl)
		if got := infl[(len(infl)+1)/2-1]; got != r.TTFTInflP50Ns {
			t.Errorf("%s: TTFT inflation p50 %d, by hand %d", r.Name, r.TTFTInflP50Ns, got)
		}
		if r.Step.Kind == KindBurst {
			// Two waves of 6 together: the second due as the first's last event.
			if len(waves) != 2 || waves[0] != 6 || waves[int64(p.wave)] != 6 || r.Steady != nil {
				t.Errorf("%s: requests by intended start %v, want 6 at 0 and 6 at %v; steady %+v", r.Name, waves, p.wave, r.Steady)
			}
		}
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ttft infl p50", "offset removed per stamp mode", "scrapes of the mock's /metrics", "burner goroutines"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, out.String())
		}
	}
}

// A step's description rounds rates derived from an ITL (a burst of 100
// streams at 75 ms is 1333.33... events/s).
func TestDescribeRoundsRates(t *testing.T) {
	cfg := Config{Bursts: []int{100}, BurstITL: 75 * time.Millisecond}
	var burst Step
	for _, s := range cfg.Ladder() {
		if s.Kind == KindBurst {
			burst = s
		}
	}
	if got := describe(burst); got != "2 waves of 100 streams started together, 1333 events/s" {
		t.Errorf("burst step: %q", got)
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{1333.3333333333335, "1333"}, {13.333, "13.3"}, {0.5, "0.5"}, {400, "400"}, {2.0 / 3, "0.667"}} {
		if got := fmtRate(c.v); got != c.want {
			t.Errorf("fmtRate(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestPrefillSetsTheMocksFirstEvent: Prefill is the mock's time to a
// stream's first event, the ITL the rest; without it both are the ITL;
// the step's span makes room for the longer of the two.
func TestPrefillSetsTheMocksFirstEvent(t *testing.T) {
	p := size(Step{Kind: KindStreams, Streams: 10, EventsPerS: 20}, time.Second, 500*time.Millisecond, 0)
	if c := p.mockConfig().Latency; time.Duration(c.PrefillBase) != 500*time.Millisecond || time.Duration(c.DecodeBase) != 500*time.Millisecond {
		t.Errorf("without a prefill: prefill %v, decode %v", time.Duration(c.PrefillBase), time.Duration(c.DecodeBase))
	}
	short := p.span()
	p.prefill = 50 * time.Millisecond
	if c := p.mockConfig().Latency; time.Duration(c.PrefillBase) != 50*time.Millisecond || time.Duration(c.DecodeBase) != 500*time.Millisecond {
		t.Errorf("with a 50ms prefill: prefill %v, decode %v", time.Duration(c.PrefillBase), time.Duration(c.DecodeBase))
	}
	if p.span() != short {
		t.Errorf("span %v with a shorter prefill, %v without", p.span(), short)
	}
	if err := Validate(Config{Prefill: -time.Second, Mode: ModeInProcess}); err == nil || !strings.Contains(err.Error(), "Prefill -1s") {
		t.Errorf("a negative prefill: %v", err)
	}
}

// TestCPUSamplerThinsAndInterpolates: a sampler over a counter keeps its
// first and last samples in time order when it thins to half, and cpuAt
// reads a counter between samples and refuses times outside them.
func TestCPUSamplerThinsAndInterpolates(t *testing.T) {
	var n int64
	s := &cpuSampler{read: func() int64 { n += 10; return n }}
	for range maxCPUSamples - 1 {
		if s.take() {
			t.Fatal("thinned before the samples were full")
		}
	}
	if !s.take() {
		t.Fatal("did not thin when full")
	}
	got := s.samples
	if len(got) > maxCPUSamples/2+1 || got[0].cpu != 10 || got[len(got)-1].cpu != 10*maxCPUSamples {
		t.Fatalf("%d samples from cpu %d to %d after thinning, want at most %d from 10 to %d", len(got), got[0].cpu, got[len(got)-1].cpu, maxCPUSamples/2+1, 10*maxCPUSamples)
	}
	for i := 1; i < len(got); i++ {
		if got[i].at < got[i-1].at || got[i].cpu <= got[i-1].cpu {
			t.Fatalf("samples out of order at %d: %+v then %+v", i, got[i-1], got[i])
		}
	}
	samples := []cpuSample{{100, 1000}, {200, 1000}, {300, 3000}}
	for _, c := range []struct {
		at   int64
		want float64
		ok   bool
	}{{99, 0, false}, {100, 1000, true}, {150, 1000, true}, {250, 2000, true}, {300, 3000, true}, {301, 0, false}} {
		if v, ok := cpuAt(samples, c.at); v != c.want || ok != c.ok {
			t.Errorf("cpuAt(%d) = %g, %v; want %g, %v", c.at, v, ok, c.want, c.ok)
		}
	}
}
