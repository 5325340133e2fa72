package analyze

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

const ms = int64(1e6)

// writeRecording writes recs to a recording in dir and returns its path.
func writeRecording(t testing.TB, dir, name string, meta trace.RunMeta, recs []trace.Record) string {
	t.Helper()
	p := filepath.Join(dir, name)
	w, err := trace.NewRecordWriter(p, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// rec builds a record; times in ms, events as (ms, tokens) pairs.
func rec(id string, turn int32, intended, slot, sent, done int64, status int32, kind trace.ErrorKind, prompt, input, completion, cached int32, events ...[2]int64) trace.Record {
	r := trace.Record{RequestID: id, ConversationID: "c-" + id, Turn: turn,
		IntendedNs: intended * ms, SlotNs: slot * ms, SentNs: sent * ms, DoneNs: done * ms,
		Status: status, ErrorKind: kind, PromptTokens: prompt, InputTokens: input,
		CompletionTokens: completion, CachedTokens: cached, EventNs: []int64{}, EventTokens: []int32{}}
	for _, e := range events {
		r.EventNs = append(r.EventNs, e[0]*ms)
		r.EventTokens = append(r.EventTokens, int32(e[1]))
	}
	return r
}

// handRecords is the hand-computed scenario of TestHandComputed.
func handRecords() []trace.Record {
	warm := rec("w", 0, 100, 100, 100, 210, 200, "", 10, 10, 1, -1, [2]int64{200, 1})
	warm.Warmup = true
	return []trace.Record{
		warm,
		// Role-only first chunk, a 3-token event, usage reported.
		rec("r1", 0, 900, 950, 1000, 1310, 200, "", 100, 90, 5, 40,
			[2]int64{1100, 0}, [2]int64{1150, 1}, [2]int64{1200, 3}, [2]int64{1300, 1}),
		// One-token output, no usage: output from events, prompt from input_tokens.
		rec("r2", 1, 2000, 2000, 2000, 2510, 200, "", -1, 50, -1, -1, [2]int64{2500, 1}),
		// Failed mid-stream: its events must not count.
		rec("r3", 1, 2900, 2900, 2900, 3500, 200, trace.ErrTimeout, 70, 70, -1, -1, [2]int64{3000, 2}),
		// HTTP 500 without an error kind: counted as http_status.
		rec("r4", 2, 3000, 3000, 3000, 3010, 500, "", -1, 30, -1, -1),
		rec("r6", 1, 1500, 1500, 1500, 2700, 200, "", 200, 180, 4, 150,
			[2]int64{1600, 0}, [2]int64{1700, 2}, [2]int64{2600, 2}),
	}
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", name, got, want)
	}
}

func TestHandComputed(t *testing.T) {
	dir := t.TempDir()
	p := writeRecording(t, dir, "run.parquet", trace.RunMeta{StartWallNs: 1_700_000_000e9}, handRecords())
	s, err := Files([]string{p}, Options{Percentiles: []float64{50, 99}, Metrics: []string{"ttft", "tpot", "itl", "e2el"},
		Goodput: SLO{TTFTms: Limit(200), TPOTms: Limit(100)}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 5 || s.ExcludedWarmup != 1 || s.Completed != 3 || s.Failed != 2 {
		t.Fatalf("requests %d excluded %d completed %d failed %d", s.Requests, s.ExcludedWarmup, s.Completed, s.Failed)
	}
	// Warm-up excluded: duration runs from the first intended send (900 ms) to the last end (3500 ms).
	near(t, "duration", s.Duration, 2.6)
	if s.TotalInput != 350 || s.TotalOutput != 10 {
		t.Errorf("tokens in %d out %d, want 350 10", s.TotalInput, s.TotalOutput)
	}
	near(t, "request throughput", s.RequestThroughput, 3/2.6)
	near(t, "output throughput", s.OutputThroughput, 10/2.6)
	near(t, "total throughput", s.TotalTokenThroughput, 360/2.6)
	near(t, "goodput", s.RequestGoodput, 1/2.6) // only r1 meets ttft<=200 and tpot<=100
	near(t, "peak output", s.MaxOutputTokensPerS, 6)
	if s.MaxConcurrentRequests != 2 {
		t.Errorf("peak concurrency %d, want 2", s.MaxConcurrentRequests)
	}
	// TTFT 100, 500, 100.
	near(t, "mean ttft", s.TTFT.Mean, 700.0/3)
	near(t, "median ttft", s.TTFT.Median, 100)
	near(t, "p99 ttft", s.TTFT.Percentiles[1].Value, 100+0.98*400)
	near(t, "std ttft", s.TTFT.Std, math.Sqrt((2*(400.0/3)*(400.0/3)+(800.0/3)*(800.0/3))/3))
	// TPOT: r1 (300-100)/4 = 50, r6 (1100-100)/3; r2 has one token.
	near(t, "mean tpot", s.TPOT.Mean, (50+1000.0/3)/2)
	if s.TPOT.Count != 2 {
		t.Errorf("tpot count %d, want 2", s.TPOT.Count)
	}
	// ITL per event: 50 50 100 | (r2: none) | 100 900.
	near(t, "mean itl", s.ITL.Mean, 240)
	near(t, "median itl", s.ITL.Median, 100)
	near(t, "p99 itl", s.ITL.Percentiles[1].Value, 100+0.96*800)
	// Per token: 50/1 50/3 100/1 | 100/2 900/2.
	near(t, "mean itl per token", s.ITLPerToken.Mean, (50+50.0/3+100+50+450)/5)
	// Request mean: r1 200/4, r6 1000/3.
	near(t, "mean itl request", s.ITLRequestMean.Mean, (50+1000.0/3)/2)
	// E2EL 300 500 1100.
	near(t, "mean e2el", s.E2EL.Mean, 1900.0/3)
	// Corrected: r1 from 900: TTFT 200, E2EL 400; r2 500/500; r6 100/1100.
	near(t, "mean corrected ttft", s.CorrectedTTFT.Mean, 800.0/3)
	near(t, "mean corrected e2el", s.CorrectedE2EL.Mean, 2000.0/3)
	near(t, "mean queue", s.Queue.Mean, 50.0/3)
	near(t, "mean send delay", s.SendDelay.Mean, 50.0/3)
	if len(s.Errors) != 2 || s.Errors[0].Count != 1 || s.Errors[0].Kind != string(trace.ErrHTTPStatus) || s.Errors[1].Kind != string(trace.ErrTimeout) {
		t.Errorf("errors %+v", s.Errors)
	}
	if s.Cache.Reporting != 2 || s.Cache.CachedTokens != 190 {
		t.Errorf("cache %+v", s.Cache)
	}
	near(t, "cache hit", s.Cache.HitRatio, 190.0/300)
	if len(s.Turns) != 3 || s.Turns[1].Completed != 2 || s.Turns[1].Failed != 1 || s.Turns[2].Failed != 1 {
		t.Fatalf("turns %+v", s.Turns)
	}
	near(t, "turn 1 ttft", s.Turns[1].MeanTTFTms, 300)
	near(t, "turn 0 hit", s.Turns[0].CacheHitRatio, 0.4)
	// Multi-turn describe (TestMultiTurnScriptInputs has the details):
	// ttft_ms 150, 500, 0.1 (r6's first content chunk carried 2 tokens),
	// std with ddof=1.
	mtTTFT := []float64{150, 500, 0.1}
	m := (150 + 500 + 0.1) / 3
	near(t, "multi-turn ttft std", s.MultiTurn.Rows[0].Std, math.Sqrt(((mtTTFT[0]-m)*(mtTTFT[0]-m)+(mtTTFT[1]-m)*(mtTTFT[1]-m)+(mtTTFT[2]-m)*(mtTTFT[2]-m))/2))
	if s.MultiTurn.Rows[6].Max != 2 {
		t.Errorf("output_num_chunks max %v, want 2 (r1: 3 content chunks - 1)", s.MultiTurn.Rows[6].Max)
	}
	// Series: r1's 5 tokens and r6's 2 at 1.7 s fall in bin 1; r2's token and r6's last 2 in bin 2.
	if got := s.Series.OutputTokens[:3]; got[0] != 0 || got[1] != 7 || got[2] != 3 {
		t.Errorf("output tokens per s %v, want [0 7 3]", got)
	}

	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	wantBlock := strings.Join([]string{
		"============ Serving Benchmark Result ============",
		"Successful requests:                     3         ",
		"Failed requests:                         2         ",
		"Benchmark duration (s):                  2.60      ",
		"Total input tokens:                      350       ",
		"Total generated tokens:                  10        ",
		"Request throughput (req/s):              1.15      ",
		"Request goodput (req/s):                 0.38      ",
		"Output token throughput (tok/s):         3.85      ",
		"Peak output token throughput (tok/s):    6.00      ",
		"Peak concurrent requests:                2.00      ",
		"Total token throughput (tok/s):          138.46    ",
		"---------------Time to First Token----------------",
		"Mean TTFT (ms):                          233.33    ",
		"Median TTFT (ms):                        100.00    ",
		"P50 TTFT (ms):                           100.00    ",
		"P99 TTFT (ms):                           492.00    ",
		"-----Time per Output Token (excl. 1st token)------",
		"Mean TPOT (ms):                          191.67    ",
		"Median TPOT (ms):                        191.67    ",
		"P50 TPOT (ms):                           191.67    ",
		"P99 TPOT (ms):                           330.50    ",
		"---------------Inter-token Latency----------------",
		"Mean ITL (ms):                           240.00    ",
		"Median ITL (ms):                         100.00    ",
		"P50 ITL (ms):                            100.00    ",
		"P99 ITL (ms):                            868.00    ",
		"----------------End-to-end Latency----------------",
		"Mean E2EL (ms):                          633.33    ",
		"Median E2EL (ms):                        500.00    ",
		"P50 E2EL (ms):                           500.00    ",
		"P99 E2EL (ms):                           1088.00   ",
		"==================================================",
	}, "\n") + "\n"
	if !strings.HasPrefix(text.String(), wantBlock) {
		t.Errorf("text block:\n%s\nwant:\n%s", text.String()[:min(len(text.String()), len(wantBlock)+200)], wantBlock)
	}
	for _, sec := range []string{"ITL by definition", "Latency from intended send", "Client health", "Errors by kind", "Cached prompt tokens", "Per turn", "Statistics summary:"} {
		if !strings.Contains(text.String(), sec) {
			t.Errorf("text lacks section %q", sec)
		}
	}

	var js bytes.Buffer
	if err := s.WriteJSON(&js, true); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"completed": 3.0, "failed": 2.0, "num_prompts": 5.0, "request_rate": "inf",
		"p99_ttft_ms": 492.0, "median_itl_ms": 100.0, "max_output_tokens_per_s": 6.0, "max_concurrent_requests": 2.0} {
		if g := got[k]; g != want {
			if gf, ok := g.(float64); !ok || math.Abs(gf-want.(float64)) > 1e-9 {
				t.Errorf("json %s = %v, want %v", k, g, want)
			}
		}
	}
	for _, k := range []string{"date", "duration", "std_ttft_ms", "p50_e2el_ms", "mean_tpot_ms", "request_goodput", "itls", "tracekit"} {
		if _, ok := got[k]; !ok {
			t.Errorf("json lacks %q", k)
		}
	}
	itls := got["itls"].([]any)
	if first := itls[0].([]any); len(first) != 3 || math.Abs(first[2].(float64)-0.1) > 1e-12 {
		t.Errorf("itls[0] = %v, want [0.05 0.05 0.1]", first)
	}
	if len(itls[1].([]any)) != 0 {
		t.Errorf("one-token request itls = %v, want []", itls[1])
	}
}

func TestPercentileNumpy(t *testing.T) {
	// Values from numpy.percentile with the default (linear) method.
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]float64{0: 1, 25: 3.25, 50: 5.5, 90: 9.1, 99: 9.91, 99.9: 9.991, 100: 10} {
		near(t, "percentile", Percentile(x, p), want)
	}
	y := []float64{0.1, 0.4, 2.5, 7, 100}
	for p, want := range map[float64]float64{10: 0.22, 50: 2.5, 75: 7, 95: 81.4, 99: 96.28} {
		near(t, "percentile y", Percentile(y, p), want)
	}
	if Percentile(nil, 99) != 0 || Percentile([]float64{42}, 99) != 42 {
		t.Error("empty gives 0 and one value gives itself")
	}
}

func TestHistogramRelativeError(t *testing.T) {
	exact, approx := newDist(1<<30), newDist(1000)
	v := 1000.0
	for i := range 20000 {
		v = 1e6 + float64((i*7919)%100000)*1e3 // 1 ms .. 101 ms
		exact.Add(v)
		approx.Add(v)
	}
	if !approx.Approximate() || exact.Approximate() {
		t.Fatal("approx must have switched, exact not")
	}
	for _, p := range []float64{1, 50, 90, 99, 99.9} {
		e, a := exact.Quantile(p), approx.Quantile(p)
		if math.Abs(a-e)/e > HistRelErr*1.01 {
			t.Errorf("p%v: histogram %v exact %v (rel err %.5f)", p, a, e, math.Abs(a-e)/e)
		}
	}
	se, sa := exact.Stats(nil), approx.Stats(nil)
	near(t, "hist mean", sa.Mean, se.Mean)
	if math.Abs(sa.Std-se.Std)/se.Std > 1e-9 {
		t.Errorf("std %v vs %v", sa.Std, se.Std)
	}
}

func TestShardsAlignOnWallClock(t *testing.T) {
	dir := t.TempDir()
	a := writeRecording(t, dir, "a.parquet", trace.RunMeta{StartWallNs: 5e9},
		[]trace.Record{rec("a", 0, 0, 0, 0, 600, 200, "", 10, 10, 2, -1, [2]int64{100, 1}, [2]int64{500, 1})})
	// Shard b started 1 s later: its request really ran 1.0-1.5 s into the run.
	b := writeRecording(t, dir, "b.parquet", trace.RunMeta{StartWallNs: 6e9},
		[]trace.Record{rec("b", 0, 0, 0, 0, 500, 200, "", 10, 10, 2, -1, [2]int64{200, 1}, [2]int64{400, 1})})
	s, err := Files([]string{a, b}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "duration", s.Duration, 1.5)
	if s.MaxConcurrentRequests != 1 || s.Files[1].OffsetNs != 1e9 || s.Reqs[1].SentNs != 1e9 {
		t.Errorf("peak %d offset %d sent %d", s.MaxConcurrentRequests, s.Files[1].OffsetNs, s.Reqs[1].SentNs)
	}
}

func TestWindow(t *testing.T) {
	dir := t.TempDir()
	recs := handRecords()
	p := writeRecording(t, dir, "w.parquet", trace.RunMeta{}, recs)
	w, err := ParseWindow("1.2s-2.95s")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Files([]string{p}, Options{Window: w})
	if err != nil {
		t.Fatal(err)
	}
	// Sent in [1.2 s, 2.95 s): r2 (2.0), r3 (2.9), r6 (1.5).
	if s.Requests != 3 || s.Completed != 2 || s.ExcludedByWindow != 2 {
		t.Errorf("requests %d completed %d excluded %d", s.Requests, s.Completed, s.ExcludedByWindow)
	}
	near(t, "duration", s.Duration, 3.5-1.2)
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeRecording(t, dir, "good.parquet", trace.RunMeta{}, handRecords())
	raw, _ := os.ReadFile(good)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tw, err := trace.NewTraceWriter(filepath.Join(dir, "trace.parquet"), trace.TraceMeta{})
	if err != nil {
		t.Fatal(err)
	}
	tw.Write(trace.Turn{ConversationID: "c"})
	tw.Close()
	// A recording from a newer tracekit: the next schema version.
	newer := filepath.Join(dir, "newer.parquet")
	f, err := os.Create(newer)
	if err != nil {
		t.Fatal(err)
	}
	pw := parquet.NewGenericWriter[trace.Record](f, parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, strconv.Itoa(trace.RecordingSchemaVersion+1)))
	pw.Write(handRecords())
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A recording whose event gaps are not whole microseconds (tracekit
	// writes whole ones).
	fraction := filepath.Join(dir, "fraction.parquet")
	if f, err = os.Create(fraction); err != nil {
		t.Fatal(err)
	}
	type gapRow struct {
		RequestID   string    `parquet:"request_id"`
		SentNs      int64     `parquet:"sent_ns"`
		EventGapUs  []float64 `parquet:"event_gap_us,list"`
		EventTokens []int32   `parquet:"event_tokens,list"`
	}
	fw := parquet.NewGenericWriter[gapRow](f, parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, strconv.Itoa(trace.RecordingSchemaVersion)))
	fw.Write([]gapRow{{"a", 5, []float64{7, 3}, []int32{0, 1}}, {"b", 9, []float64{50_000, 20_000.5}, []int32{0, 1}}})
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bad := rec("x", 0, 0, 0, 0, 10, 200, "", 1, 1, 1, -1, [2]int64{5, 1})
	bad.EventTokens = nil
	unsorted := rec("y", 0, 0, 0, 0, 10, 200, "", 1, 1, 1, -1, [2]int64{5, 1}, [2]int64{3, 1})
	cases := map[string]struct{ path, want string }{
		"empty":       {write("empty.parquet", nil), "not a readable Parquet file"},
		"not parquet": {write("x.csv", []byte("a,b\n1,2\n")), "not a readable Parquet file"},
		"truncated":   {write("trunc.parquet", raw[:len(raw)/2]), "not a readable Parquet file"},
		"a trace":     {filepath.Join(dir, "trace.parquet"), "expected a tracekit.recording file"},
		"newer":       {newer, "schema version " + strconv.Itoa(trace.RecordingSchemaVersion+1)},
		"no rows":     {writeRecording(t, dir, "none.parquet", trace.RunMeta{}, nil), "holds no requests"},
		"missing":     {filepath.Join(dir, "nope.parquet"), "no such file"},
		"parallel":    {writeRecording(t, dir, "par.parquet", trace.RunMeta{}, []trace.Record{bad}), "row 0 (request \"x\"): 1 event times (event_gap_us, or event_gap_ns or event_ns in an older recording) but 0 event_tokens"},
		"unsorted":    {writeRecording(t, dir, "uns.parquet", trace.RunMeta{}, []trace.Record{unsorted}), "expected non-decreasing"},
		"fraction":    {fraction, "row 1: event_gap_us element 1 is 20000.5: expected a whole number of microseconds"},
	}
	for name, c := range cases {
		_, err := Files([]string{c.path}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: err = %v, want it to name %s and say %q", name, err, c.path, c.want)
		}
		if err != nil && !errorsIsBad(err) {
			t.Errorf("%s: %v does not wrap ErrBadInput", name, err)
		}
	}
}

// analyze prints the client's health verdicts once per cause: the v1
// recording's stored scheduler-latency warning used to be repeated in
// other words by analyze's own check.
func TestHealthWarnsOncePerCause(t *testing.T) {
	s, err := Files([]string{"../../testdata/recording-v1.parquet"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range s.Warnings {
		if strings.Contains(strings.ToLower(w), "scheduler latency") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d scheduler-latency warnings, want 1: %q", n, s.Warnings)
	}
}

// inspect (trace.SummarizeRecording) and analyze use one quantile
// definition, numpy's linear: on the same file their medians agree (the
// v1 recording has 8 requests, where nearest rank and linear differ).
func TestInspectAndAnalyzeMediansAgree(t *testing.T) {
	const p = "../../testdata/recording-v1.parquet"
	rs, err := trace.SummarizeRecording(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Files([]string{p}, Options{Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	if rs.TTFTms.N != s.TTFT.Count || rs.TTFTms.N != 8 {
		t.Fatalf("inspect counts %d TTFTs, analyze %d", rs.TTFTms.N, s.TTFT.Count)
	}
	near(t, "median TTFT", rs.TTFTms.P50, s.TTFT.Median)
	near(t, "median E2EL", rs.E2ELms.P50, s.E2EL.Median)
	near(t, "mean E2EL", rs.E2ELms.Mean, s.E2EL.Mean)
}

// A non-streaming request (its one event is the body) counts as completed
// in vLLM's block with its E2EL and tokens, and adds no TTFT, TPOT or ITL.
func TestNonStreaming(t *testing.T) {
	stream := rec("s", 0, 0, 0, 0, 400, 200, "", 10, 10, 3, -1, [2]int64{100, 1}, [2]int64{200, 1}, [2]int64{300, 1})
	whole := rec("n", 0, 0, 0, 50, 600, 200, "", 20, 20, 7, -1, [2]int64{550, 7})
	whole.NonStreaming, whole.TokensExact = true, true
	p := writeRecording(t, t.TempDir(), "ns.parquet", trace.RunMeta{}, []trace.Record{stream, whole})
	s, err := Files([]string{p}, Options{Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != 2 || s.Failed != 0 || s.NonStreaming != 1 || s.TotalOutput != 10 || s.TotalInput != 30 {
		t.Fatalf("completed %d (non-streaming %d) failed %d output %d input %d", s.Completed, s.NonStreaming, s.Failed, s.TotalOutput, s.TotalInput)
	}
	if s.TTFT.Count != 1 || s.TPOT.Count != 1 || s.ITL.Count != 2 || s.E2EL.Count != 2 || s.ITLRequestMean.Count != 1 || s.CorrectedTTFT.Count != 1 {
		t.Errorf("counts ttft %d tpot %d itl %d e2el %d", s.TTFT.Count, s.TPOT.Count, s.ITL.Count, s.E2EL.Count)
	}
	near(t, "mean ttft", s.TTFT.Mean, 100)
	near(t, "mean e2el", s.E2EL.Mean, (300+500)/2.0)
	near(t, "peak output (stream messages only)", s.MaxOutputTokensPerS, 3)
	if s.MaxConcurrentRequests != 2 {
		t.Errorf("peak concurrency %d, want 2", s.MaxConcurrentRequests)
	}
	if got := s.Series.OutputTokens[0]; got != 10 {
		t.Errorf("tokens in the first second %v, want 10", got)
	}
	// vLLM multi-turn's client gives a one-chunk answer its latency as TTFT.
	if s.Turns[0].Completed != 2 || s.Turns[0].MeanTTFTms != 100 || s.MultiTurn.Rows[0].Count != 2 || s.MultiTurn.Rows[0].Max != 550 || s.MultiTurn.Rows[2].Count != 2 {
		t.Errorf("per turn %+v, multi-turn ttft count %d latency count %d", s.Turns[0], s.MultiTurn.Rows[0].Count, s.MultiTurn.Rows[2].Count)
	}
	q := s.Reqs[1]
	if !q.NonStreaming || !q.Success || q.TTFTNs != 0 || q.TPOTNs != 0 || q.E2ELNs != 500*ms || q.OutputTokens != 7 {
		t.Errorf("derived %+v", q)
	}
	var js bytes.Buffer
	if err := s.WriteJSON(&js, true); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(js.Bytes(), &got)
	if itls := got["itls"].([]any); len(itls[1].([]any)) != 0 {
		t.Errorf("non-streaming itls %v", itls[1])
	}
	var text bytes.Buffer
	s.WriteText(&text)
	if !strings.Contains(text.String(), "Non-streaming completed:                 1") {
		t.Errorf("text does not count the non-streaming request:\n%s", text.String())
	}
	dir := t.TempDir()
	if err := s.WritePerRequest(filepath.Join(dir, "r.parquet")); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadPerRequest(filepath.Join(dir, "r.parquet"))
	if err != nil || !rows[1].NonStreaming || rows[0].NonStreaming || rows[1].TTFTms != 0 || rows[1].E2ELms != 500 {
		t.Errorf("per-request rows %+v, %v", rows, err)
	}
}

// --start slot measures TTFT and E2EL from slot_ns (vLLM's st: before the
// request is built and sent) instead of sent_ns.
func TestStartSlot(t *testing.T) {
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	sent, err := Files([]string{p}, Options{Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	slot, err := Files([]string{p}, Options{Metrics: allMetrics, Start: StartSlot})
	if err != nil {
		t.Fatal(err)
	}
	// r1 got its slot at 950 ms and was sent at 1000 ms; r2 and r6 at once.
	near(t, "mean ttft from sent", sent.TTFT.Mean, (100+500+100)/3.0)
	near(t, "mean ttft from slot", slot.TTFT.Mean, (150+500+100)/3.0)
	near(t, "mean e2el from slot", slot.E2EL.Mean, (350+500+1100)/3.0)
	if q := slot.Reqs[0]; q.StartNs != 950*ms || q.TTFTNs != 150*ms || q.SendDelayNs != 50*ms {
		t.Errorf("r1 from slot: %+v", q)
	}
	var b bytes.Buffer
	slot.WriteText(&b)
	if !strings.Contains(b.String(), "slot_ns (vLLM's st") {
		t.Error("the text does not say which start was used")
	}
}

// A goodput SLO of 0 is a limit, as in vLLM: only requests at or below 0
// meet it (a TPOT of 0: one-token answers), and the goodput row is printed.
func TestGoodputZeroSLO(t *testing.T) {
	slo, err := ParseGoodput([]string{"tpot:0"})
	if err != nil || slo.TPOTms == nil || *slo.TPOTms != 0 {
		t.Fatalf("tpot:0 parsed as %+v, %v", slo, err)
	}
	if _, err := ParseGoodput([]string{"ttft:-1"}); err == nil {
		t.Error("a negative SLO must be refused")
	}
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	s, err := Files([]string{p}, Options{Goodput: slo})
	if err != nil {
		t.Fatal(err)
	}
	// Of r1, r2, r6 only r2 (one output token, TPOT 0) meets tpot <= 0.
	if s.GoodCompleted != 1 {
		t.Errorf("good %d, want 1", s.GoodCompleted)
	}
	var b bytes.Buffer
	s.WriteText(&b)
	if !strings.Contains(b.String(), "Request goodput (req/s):") || jsonOf(t, s, false)["request_goodput"] == nil {
		t.Error("a zero SLO must still report goodput")
	}
}

// Each ITL definition is labelled with the tool that uses it; guidellm's
// starts at the first content chunk, so it differs from AIPerf's request
// mean when a role-only chunk comes first.
func TestITLDefinitionsLabelled(t *testing.T) {
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	s, err := Files([]string{p}, Options{ITL: ITLFirstContent})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "AIPerf request mean", s.ITLRequestMean.Mean, (200.0/4+1000.0/3)/2)
	near(t, "guidellm first-content mean", s.ITLFirstContent.Mean, (150.0/4+900.0/3)/2)
	near(t, "headline ITL", s.ITL.Mean, s.ITLFirstContent.Mean)
	var b bytes.Buffer
	s.WriteText(&b)
	for _, want := range []string{"per-event gap (vLLM bench serve)", "per-token gap/tokens (GenAI-Perf)", "request mean (AIPerf 0.8)",
		"first-content mean (guidellm)", "ITL definition in the block above:       first-content: first-content mean (guidellm)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if m, err := ParseITLMode("first-content"); err != nil || m != ITLFirstContent {
		t.Errorf("parse: %v %v", m, err)
	}
}
