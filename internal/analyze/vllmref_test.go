package analyze

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// faultyRecording replays a trace against a real mock server that injects
// every fault kind (429, 500, 503, reset, disconnect, stall past the idle
// timeout, malformed event, no [DONE], slow headers) and returns the
// recording's path.
func faultyRecording(t *testing.T) string {
	t.Helper()
	srv := mocktest.Start(t, func(cfg *mock.Config) {
		cfg.Seed = 11
		cfg.Latency.OutputMean = 12
		cfg.Faults = mock.FaultRates{Status429: 0.04, Status500: 0.04, Status503: 0.05, Reset: 0.04, Disconnect: 0.06,
			Stall: 0.04, Malformed: 0.05, NoDone: 0.07, SlowHeaders: 0.04,
			StallFor: mock.Duration(400 * time.Millisecond), SlowHeadersFor: mock.Duration(30 * time.Millisecond)}
	})
	dir := t.TempDir()
	var turns []trace.Turn
	for c := range 120 {
		for k := range int32(2) {
			turns = append(turns, trace.Turn{ConversationID: fmt.Sprintf("c%03d", c), Turn: k,
				StartOffsetNs: int64(c) * 2e6, ArrivalOffsetNs: int64(c)*2e6 + int64(k)*1e8,
				Messages:    []trace.Message{{Role: "user", Content: fmt.Sprintf("question %d of conversation %d, please answer", k, c), Tokens: 9}},
				InputTokens: 9, OutputTokens: 16})
		}
	}
	tracePath := filepath.Join(dir, "trace.parquet")
	if err := trace.WriteTrace(tracePath, trace.TraceMeta{Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	// No probe: the mock draws its faults for the probe too (its id is new
	// each run), and a refused probe would fail the run before it starts.
	r, err := replay.New(replay.Config{Trace: tracePath, Targets: []string{srv.URL()}, Model: "tracekit-mock",
		ContinuousUsage: "off", NoProbe: true, MaxConcurrency: 16, IdleTimeout: 150 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := filepath.Join(dir, "run.parquet")
	rec, err := record.NewRecorder(out, trace.RunMeta{}, record.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// vllmOutput is vLLM's RequestFuncOutput as its chat client would have
// filled it for one recorded request.
type vllmOutput struct {
	success                bool
	ttft, latency, start   float64 // seconds
	queue                  float64
	itl                    []float64
	promptLen, outputToken int
	err                    bool
}

// vllmOutputs follows vLLM's openai-chat request function over the
// recorded events (an independent transcription, sharing nothing with
// analyze): st is the start stamp; prompt_len starts as the client's
// count and is replaced by usage.prompt_tokens when the usage chunk came;
// only HTTP 200 is read; each message with choices is an event, the first
// sets ttft, the others append to itl; an exception (any recorded error
// except a body that ended without [DONE] and without a read error) leaves
// latency at 0 and fails the request, as does a body with no event.
func vllmOutputs(recs []trace.Record, slot bool) []vllmOutput {
	var outs []vllmOutput
	for _, r := range recs {
		st := float64(r.SentNs) / 1e9
		if slot {
			st = float64(r.SlotNs) / 1e9
		}
		o := vllmOutput{start: st, queue: st - float64(r.IntendedNs)/1e9, promptLen: int(r.InputTokens), itl: []float64{}}
		if r.PromptTokens >= 0 {
			o.promptLen = int(r.PromptTokens)
		}
		if r.CompletionTokens > 0 {
			o.outputToken = int(r.CompletionTokens)
		}
		exception := r.ErrorKind != "" && !(r.ErrorKind == trace.ErrStreamTruncated && len(r.ErrorMessage) > 20 && r.ErrorMessage[:21] == "the body ended after ")
		if r.Status != 200 {
			o.err = true
			outs = append(outs, o)
			continue
		}
		recent := st
		for i, t := range r.EventNs {
			ts := float64(t) / 1e9
			if i == 0 {
				o.ttft = ts - st
			} else {
				o.itl = append(o.itl, ts-recent)
			}
			recent = ts
		}
		if !exception {
			o.success = len(r.EventNs) > 0
			o.latency = recent - st
		}
		o.err = !o.success
		if o.outputToken == 0 && o.success { // vLLM counts the text with its tokenizer: the recorded counts stand in
			for _, n := range r.EventTokens {
				o.outputToken += int(n)
			}
		}
		outs = append(outs, o)
	}
	return outs
}

// npStats are numpy's mean, population std, median and linear percentile
// of xs in ms (0 for an empty list, as vLLM's `xs or 0`).
func npStats(xs []float64, ps []float64) (mean, std, median float64, pct []float64) {
	pct = make([]float64, len(ps))
	if len(xs) == 0 {
		return 0, 0, 0, pct
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	q := func(p float64) float64 {
		h := float64(len(s)-1) * p / 100
		lo := int(math.Floor(h))
		if lo+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[lo] + (s[lo+1]-s[lo])*(h-float64(lo))
	}
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	for _, x := range s {
		std += (x - mean) * (x - mean)
	}
	std = math.Sqrt(std / float64(len(s)))
	for i, p := range ps {
		pct[i] = q(p) * 1000
	}
	return mean * 1000, std * 1000, q(50) * 1000, pct
}

// vllmMetrics is vLLM's calculate_metrics and its result dict over outs,
// with dur the benchmark duration and the goodput SLOs in ms.
func vllmMetrics(outs []vllmOutput, dur float64, ps []float64, slo map[string]float64) map[string]any {
	res := map[string]any{}
	var ttfts, tpots, allTpots, itls, e2els []float64
	var outLens []int
	completed, totalIn, good := 0, 0, 0
	for _, o := range outs {
		if !o.success {
			outLens = append(outLens, 0)
			continue
		}
		n := o.outputToken
		outLens = append(outLens, n)
		totalIn += o.promptLen
		tpot := 0.0
		if n > 1 {
			tpot = (o.latency - o.ttft) / float64(n-1)
			tpots = append(tpots, tpot)
		}
		allTpots = append(allTpots, tpot)
		itls = append(itls, o.itl...)
		ttfts = append(ttfts, o.ttft)
		e2els = append(e2els, o.latency)
		completed++
	}
	for i := range ttfts {
		ok := true
		for k, v := range map[string]float64{"ttft": ttfts[i], "tpot": allTpots[i], "e2el": e2els[i]} {
			if lim, set := slo[k]; set && !(lim/1000 >= v) {
				ok = false
			}
		}
		if ok {
			good++
		}
	}
	totalOut := 0
	for _, n := range outLens {
		totalOut += n
	}
	var succ []vllmOutput
	for _, o := range outs {
		if o.success {
			succ = append(succ, o)
		}
	}
	maxTok, peak := 0.0, 0
	if len(succ) > 0 {
		minStart, maxEnd := math.Inf(1), math.Inf(-1)
		for _, o := range succ {
			minStart, maxEnd = math.Min(minStart, o.start), math.Max(maxEnd, o.start+o.latency)
		}
		bins := make([]float64, int(math.Ceil(maxEnd-minStart))+1)
		type ev struct {
			t float64
			d int
		}
		var evs []ev
		for _, o := range succ {
			times := []float64{o.start + o.ttft}
			cur := times[0]
			for _, g := range o.itl {
				cur += g
				times = append(times, cur)
			}
			for _, tt := range times {
				if b := int(tt - minStart); b >= 0 && b < len(bins) {
					bins[b]++
				}
			}
			evs = append(evs, ev{o.start, 1}, ev{o.start + o.latency, -1})
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || (evs[i].t == evs[j].t && evs[i].d < evs[j].d) })
		cur := 0
		for _, e := range evs {
			cur += e.d
			peak = max(peak, cur)
		}
		maxTok = slices.Max(bins)
	}
	res["duration"], res["completed"], res["failed"] = dur, float64(completed), float64(len(outs)-completed)
	res["total_input_tokens"], res["total_output_tokens"] = float64(totalIn), float64(totalOut)
	res["request_throughput"] = float64(completed) / dur
	res["request_goodput"] = float64(good) / dur
	res["output_throughput"] = float64(totalOut) / dur
	res["total_token_throughput"] = float64(totalIn+totalOut) / dur
	res["max_output_tokens_per_s"], res["max_concurrent_requests"], res["rtfx"] = maxTok, float64(peak), 0.0
	for _, m := range []struct {
		key string
		xs  []float64
	}{{"ttft", ttfts}, {"tpot", tpots}, {"itl", itls}, {"e2el", e2els}} {
		mean, std, median, pct := npStats(m.xs, ps)
		res["mean_"+m.key+"_ms"], res["std_"+m.key+"_ms"], res["median_"+m.key+"_ms"] = mean, std, median
		for i, p := range ps {
			res["p"+pWord(p)+"_"+m.key+"_ms"] = pct[i]
		}
	}
	var inLens, lens, ttftL, lats, starts, queues []float64
	var itlL [][]float64
	var errs []bool
	for i, o := range outs {
		inLens = append(inLens, float64(o.promptLen))
		lens = append(lens, float64(outLens[i]))
		ttftL, lats = append(ttftL, o.ttft), append(lats, o.latency)
		starts, queues = append(starts, o.start), append(queues, o.queue)
		itlL, errs = append(itlL, o.itl), append(errs, o.err)
	}
	res["input_lens"], res["output_lens"], res["ttfts"], res["latencies"] = inLens, lens, ttftL, lats
	res["start_times"], res["queue_times"], res["itls"], res["errors"] = starts, queues, itlL, errs
	return res
}

// TestVLLMParityEveryFault: vLLM's formulas, computed here from the
// recorded events of a run with every fault kind, give every key of
// analyze's JSON, with sent_ns and with slot_ns as vLLM's st.
func TestVLLMParityEveryFault(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: replays against a mock")
	}
	path := faultyRecording(t)
	recs, _, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[trace.ErrorKind]int{}
	clean := 0
	for _, r := range recs {
		kinds[r.ErrorKind]++
		if EndedCleanly(&r) {
			clean++
		}
	}
	for _, k := range []trace.ErrorKind{"", trace.ErrHTTPStatus, trace.ErrConnect, trace.ErrStreamTruncated, trace.ErrMalformed, trace.ErrIdleTimeout} {
		if kinds[k] == 0 {
			t.Errorf("the run has no %q record (kinds %v): the parity test needs every fault", k, kinds)
		}
	}
	if clean == 0 || clean == kinds[trace.ErrStreamTruncated] {
		t.Errorf("%d of %d truncated streams ended cleanly: need both clean ends and broken connections", clean, kinds[trace.ErrStreamTruncated])
	}
	dur := 0.0
	for _, r := range recs {
		end := max(r.DoneNs, r.SentNs)
		if n := len(r.EventNs); n > 0 {
			end = max(end, r.EventNs[n-1])
		}
		dur = math.Max(dur, float64(end)/1e9)
	}
	ps := []float64{50, 90, 99}
	slo := map[string]float64{"ttft": 20, "tpot": 5, "e2el": 80}
	for _, slot := range []bool{false, true} {
		want := vllmMetrics(vllmOutputs(recs, slot), dur, ps, slo)
		opts := Options{Percentiles: ps, Metrics: allMetrics, Goodput: SLO{TTFTms: Limit(20), TPOTms: Limit(5), E2ELms: Limit(80)}}
		if slot {
			opts.Start = StartSlot
		}
		s, err := Files([]string{path}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := jsonOf(t, s, true)
		tag := map[bool]string{false: "st=sent_ns", true: "st=slot_ns"}[slot]
		t.Logf("%s: kinds %v clean %d completed %v failed %v peak %v good %v", tag, kinds, clean, want["completed"], want["failed"], want["max_output_tokens_per_s"], want["request_goodput"])
		if want["completed"].(float64) == 0 || want["failed"].(float64) == 0 {
			t.Fatalf("%s: completed %v failed %v", tag, want["completed"], want["failed"])
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok {
				t.Errorf("%s: analyze's JSON lacks %q", tag, k)
				continue
			}
			switch w := w.(type) {
			case float64:
				if gf, ok := g.(float64); !ok || math.Abs(gf-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("%s: %s = %v, vLLM's formula gives %v", tag, k, g, w)
				}
			case []float64:
				gl := floats(t, g)
				if len(gl) != len(w) {
					t.Errorf("%s: %s has %d entries, want %d", tag, k, len(gl), len(w))
					continue
				}
				for i := range w {
					if math.Abs(gl[i]-w[i]) > 1e-9*math.Max(1, math.Abs(w[i])) {
						t.Errorf("%s: %s[%d] (request %s, %s) = %v, want %v", tag, k, i, recs[i].RequestID, recs[i].ErrorKind, gl[i], w[i])
						break
					}
				}
			case [][]float64:
				gl := g.([]any)
				for i := range w {
					closeAll(t, fmt.Sprintf("%s: itls[%d]", tag, i), floats(t, gl[i]), w[i])
				}
			case []bool:
				gl := g.([]any)
				for i := range w {
					if (gl[i] != "") != w[i] {
						t.Errorf("%s: errors[%d] = %q, want an error %v", tag, i, gl[i], w[i])
					}
				}
			}
		}
	}
}
