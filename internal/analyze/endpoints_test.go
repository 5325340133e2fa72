package analyze

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

// endpointOf returns the run's figures for endpoint e.
func endpointOf(t *testing.T, s *Summary, e string) EndpointStats {
	t.Helper()
	for _, x := range s.Endpoints {
		if x.Endpoint == e {
			return x
		}
	}
	t.Fatalf("no endpoint %q in %+v", e, s.Endpoints)
	return EndpointStats{}
}

func textOf(t *testing.T, s *Summary) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// responsesRecords are three Responses requests whose streams start with
// reasoning: TTFT takes the first event, TTFO the first answer event.
func responsesRecords() []trace.Record {
	a := rec("a", 0, 1000, 1000, 1000, 1500, 200, "", 10, 10, 6, -1,
		[2]int64{1100, 1}, [2]int64{1150, 1}, [2]int64{1200, 1}, [2]int64{1300, 1}, [2]int64{1400, 2})
	a.FirstAnswerEvent, a.ReasoningTokens = 3, 3
	b := rec("b", 0, 2000, 2000, 2000, 2400, 200, "", 20, 20, 4, -1,
		[2]int64{2050, 2}, [2]int64{2250, 1}, [2]int64{2350, 1})
	b.FirstAnswerEvent, b.ReasoningTokens = 1, 2
	// Reasoning only, no usage figure for it: no TTFO, not reporting.
	c := rec("c", 0, 3000, 3000, 3000, 3300, 200, "", 30, 30, 4, -1,
		[2]int64{3100, 2}, [2]int64{3200, 2})
	c.FirstAnswerEvent, c.ReasoningTokens = 2, -1
	recs := []trace.Record{a, b, c}
	for i := range recs {
		recs[i].Endpoint = trace.EndpointResponses
	}
	return recs
}

func TestResponsesTTFTAndTTFO(t *testing.T) {
	dir := t.TempDir()
	p := writeRecording(t, dir, "run.parquet", trace.RunMeta{}, responsesRecords())
	s, err := Files([]string{p}, Options{Percentiles: []float64{50, 90}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ShowEndpoints() || len(s.Endpoints) != 1 {
		t.Fatalf("endpoints %+v, shown %v", s.Endpoints, s.ShowEndpoints())
	}
	e := endpointOf(t, s, trace.EndpointResponses)
	g := e.Generation
	if g == nil || e.Items != nil || !e.Generates || e.Completed != 3 || e.Failed != 0 {
		t.Fatalf("responses: %+v", e)
	}
	// Run: 0 to 3.3 s.
	near(t, "duration", s.Duration, 3.3)
	// TTFT 100, 50, 100.
	near(t, "ttft mean", g.TTFT.Mean, 250.0/3)
	near(t, "ttft median", g.TTFT.Median, 100)
	near(t, "ttft p90", g.TTFT.Percentiles[1].Value, 100)
	// TTFO 300 (event 3 at 1300), 250 (event 1 at 2250); c answered nothing.
	near(t, "ttfo mean", g.TTFO.Mean, 275)
	near(t, "ttfo median", g.TTFO.Median, 275)
	near(t, "ttfo p90", g.TTFO.Percentiles[1].Value, 250+0.9*50)
	if g.TTFO.Count != 2 || g.NoAnswer != 1 {
		t.Errorf("ttfo count %d, no answer %d; want 2, 1", g.TTFO.Count, g.NoAnswer)
	}
	// The run's TTFT is the endpoint's: one endpoint.
	if !reflect.DeepEqual(s.TTFT, g.TTFT) {
		t.Errorf("run TTFT %+v, endpoint %+v", s.TTFT, g.TTFT)
	}
	// Reasoning: a 3, b 2; c unreported.
	if g.ReasoningReporting != 2 || g.ReasoningTokens != 5 {
		t.Errorf("reasoning %d tokens of %d requests, want 5 of 2", g.ReasoningTokens, g.ReasoningReporting)
	}
	near(t, "mean reasoning", g.MeanReasoningTokens, 2.5)
	// TPOT: (400-100)/5 = 60, (350-50)/3 = 100, (200-100)/3.
	near(t, "tpot mean", g.TPOT.Mean, (60+100+100.0/3)/3)
	// ITL per event: 50 50 100 100 | 200 100 | 100.
	near(t, "itl mean", g.ITL.Mean, 100)
	if g.ITL.Count != 7 || g.ITLDefinition != "per-event" {
		t.Errorf("itl count %d (%s), want 7 per-event", g.ITL.Count, g.ITLDefinition)
	}
	// E2EL 400 350 200.
	near(t, "e2el mean", e.Latency.Mean, 950.0/3)
	near(t, "request throughput", e.RequestThroughput, 3/3.3)
	near(t, "input throughput", e.InputThroughput, 60/3.3)
	near(t, "output throughput", g.OutputThroughput, 14/3.3)

	text := textOf(t, s)
	for _, want := range []string{"Requests by endpoint:                    responses 3",
		"Endpoint: responses (generating)", "Reasoning tokens:                        5 in 2 reporting requests (2.50 per request)",
		"Streams without an answer token:         1", "TTFO (first answer token)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	j := jsonOf(t, s, false)
	eps := j["tracekit"].(map[string]any)["endpoints"].(map[string]any)
	ttfo := eps["responses"].(map[string]any)["generation"].(map[string]any)["ttfo"].(map[string]any)
	near(t, "json ttfo mean", ttfo["mean_ms"].(float64), 275)

	// The per-request file: endpoint, TTFO, reasoning tokens.
	pq := filepath.Join(dir, "req.parquet")
	if err := s.WritePerRequest(pq); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadPerRequest(pq)
	if err != nil {
		t.Fatal(err)
	}
	got := []RequestRow{rows[0], rows[2]}
	if got[0].Endpoint != "responses" || got[0].TTFOms != 300 || !got[0].Answered || got[0].ReasoningTokens != 3 ||
		got[1].Answered || got[1].TTFOms != 0 || got[1].ReasoningTokens != -1 {
		t.Errorf("per-request rows %+v", got)
	}
}

// mixedRecords is a run of chat, embeddings and rerank requests.
func mixedRecords() []trace.Record {
	c1 := rec("c1", 0, 100, 100, 100, 500, 200, "", 50, 50, 4, -1, [2]int64{200, 1}, [2]int64{300, 2}, [2]int64{400, 1})
	c1.ReasoningTokens = -1
	c2 := rec("c2", 0, 600, 600, 600, 1000, 200, "", 40, 40, 2, -1, [2]int64{700, 0}, [2]int64{800, 1}, [2]int64{900, 1})
	c2.ReasoningTokens = 0 // reported: none
	// Embeddings: one with its body as an event, one without any.
	e1 := rec("e1", 0, 150, 150, 150, 250, 200, "", 30, 30, -1, -1, [2]int64{250, 0})
	e1.Items, e1.NonStreaming = 3, true
	e2 := rec("e2", 0, 1100, 1100, 1100, 1400, 200, "", -1, 25, -1, -1)
	e2.Items = 2
	k1 := rec("k1", 0, 200, 200, 200, 260, 200, "", 70, 70, -1, -1, [2]int64{260, 0})
	k1.Items = 5
	k2 := rec("k2", 0, 1200, 1200, 1200, 1210, 500, trace.ErrHTTPStatus, -1, 60, -1, -1)
	for _, r := range []*trace.Record{&c1, &c2} {
		r.Endpoint = trace.EndpointChat
	}
	for _, r := range []*trace.Record{&e1, &e2} {
		r.Endpoint, r.ReasoningTokens = trace.EndpointEmbeddings, -1
	}
	for _, r := range []*trace.Record{&k1, &k2} {
		r.Endpoint, r.ReasoningTokens = trace.EndpointRerank, -1
	}
	return []trace.Record{c1, e1, k1, c2, e2, k2}
}

func TestMixedEndpoints(t *testing.T) {
	dir := t.TempDir()
	p := writeRecording(t, dir, "run.parquet", trace.RunMeta{}, mixedRecords())
	opts := Options{Percentiles: []float64{50, 90}, Metrics: []string{"ttft", "tpot", "itl", "e2el"}}
	s, err := Files([]string{p}, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The total: every request.
	near(t, "duration", s.Duration, 1.4)
	if s.Requests != 6 || s.Completed != 5 || s.Failed != 1 || s.TotalInput != 215 || s.TotalOutput != 6 {
		t.Errorf("total: requests %d completed %d failed %d input %d output %d; want 6 5 1 215 6",
			s.Requests, s.Completed, s.Failed, s.TotalInput, s.TotalOutput)
	}
	near(t, "request throughput", s.RequestThroughput, 5/1.4)
	// TTFT, TPOT and ITL: the chat streams only.
	if s.TTFT.Count != 2 || s.TPOT.Count != 2 || s.ITL.Count != 4 {
		t.Errorf("ttft %d tpot %d itl %d samples, want 2 2 4", s.TTFT.Count, s.TPOT.Count, s.ITL.Count)
	}
	near(t, "ttft mean", s.TTFT.Mean, 100)
	near(t, "itl mean", s.ITL.Mean, 100)
	// TPOT (300-100)/3 and (300-100)/1.
	near(t, "tpot mean", s.TPOT.Mean, (200.0/3+200)/2)
	// E2EL: chat 300 300, embeddings 100 300 (done - start), rerank 60.
	near(t, "e2el mean", s.E2EL.Mean, 1060.0/5)
	// Peak: the 6 chat events in the first second (not the bodies).
	near(t, "peak output", s.MaxOutputTokensPerS, 6)
	if s.MaxConcurrentRequests != 3 || s.NonStreaming != 3 {
		t.Errorf("peak concurrency %d, non-streaming %d; want 3, 3", s.MaxConcurrentRequests, s.NonStreaming)
	}
	// Per turn: TTFT and TPOT of the chats (TPOT 200/3 and 200).
	near(t, "turn tpot", s.Turns[0].MeanTPOTms, (200.0/3+200)/2)
	if s.MultiTurn.Rows[0].Count != 2 || len(s.Turns) != 1 || s.Turns[0].MeanTTFTms != 100 {
		t.Errorf("multi-turn ttft count %d, turn TTFT %+v: want the chats only", s.MultiTurn.Rows[0].Count, s.Turns)
	}

	names := []string{}
	for _, e := range s.Endpoints {
		names = append(names, e.Endpoint)
	}
	if !slices.Equal(names, []string{"chat", "embeddings", "rerank"}) || !s.ShowEndpoints() {
		t.Fatalf("endpoints %v", names)
	}
	chat := endpointOf(t, s, "chat")
	g := chat.Generation
	if chat.Requests != 2 || chat.Completed != 2 || chat.TotalInput != 90 || g.TotalOutput != 6 || chat.Items != nil {
		t.Errorf("chat %+v", chat)
	}
	near(t, "chat ttft", g.TTFT.Mean, 100)
	near(t, "chat ttfo", g.TTFO.Mean, 100) // no reasoning: the first event
	near(t, "chat tpot", g.TPOT.Mean, (200.0/3+200)/2)
	near(t, "chat itl", g.ITL.Mean, 100)
	near(t, "chat e2el", chat.Latency.Mean, 300)
	near(t, "chat output throughput", g.OutputThroughput, 6/1.4)
	if g.ReasoningReporting != 1 || g.ReasoningTokens != 0 || g.ITL.Count != 4 {
		t.Errorf("chat reasoning %d of %d, itl count %d", g.ReasoningTokens, g.ReasoningReporting, g.ITL.Count)
	}

	emb := endpointOf(t, s, "embeddings")
	if emb.Generation != nil || emb.Generates || emb.Completed != 2 || emb.Failed != 0 || emb.TotalInput != 55 || emb.Items.Total != 5 {
		t.Errorf("embeddings %+v items %+v", emb, emb.Items)
	}
	near(t, "embeddings latency mean", emb.Latency.Mean, 200)
	near(t, "embeddings latency p90", emb.Latency.Percentiles[1].Value, 100+0.9*200)
	near(t, "embeddings req/s", emb.RequestThroughput, 2/1.4)
	near(t, "embeddings input/s", emb.InputThroughput, 55/1.4)
	near(t, "embeddings items/s", emb.Items.Throughput, 5/1.4)

	rr := endpointOf(t, s, "rerank")
	if rr.Completed != 1 || rr.Failed != 1 || rr.TotalInput != 70 || rr.Items.Total != 5 || rr.Latency.Count != 1 {
		t.Errorf("rerank %+v items %+v", rr, rr.Items)
	}
	near(t, "rerank latency", rr.Latency.Mean, 60)
	near(t, "rerank items/s", rr.Items.Throughput, 5/1.4)
	// The endpoints add up to the total.
	near(t, "sum of req/s", chat.RequestThroughput+emb.RequestThroughput+rr.RequestThroughput, s.RequestThroughput)

	text := textOf(t, s)
	for _, want := range []string{"Requests by endpoint:                    chat 2, embeddings 2, rerank 2",
		"Endpoint: embeddings (non-generating)", "Items (embeddings or results):           5",
		"Item throughput (items/s):               3.57", "Successful / failed requests:            1 / 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "Endpoint: ") != 3 {
		t.Errorf("want 3 endpoint sections:\n%s", text)
	}

	// vLLM's block keeps its keys: the same as a chat run's.
	j := jsonOf(t, s, true)
	chatRun := jsonOf(t, Records(handRecords(), trace.RunMeta{}, opts), true)
	if !slices.Equal(sortedKeys(j), sortedKeys(chatRun)) {
		t.Errorf("JSON keys %v, a chat run's %v", sortedKeys(j), sortedKeys(chatRun))
	}
	// The lists: embeddings and rerank have no TTFT.
	closeAll(t, "ttfts", floats(t, j["ttfts"]), []float64{0.1, 0, 0, 0.1, 0, 0})
	eps := j["tracekit"].(map[string]any)["endpoints"].(map[string]any)
	if it := eps["embeddings"].(map[string]any)["items"].(map[string]any); it["total"] != 5.0 {
		t.Errorf("json embeddings items %v", it)
	}
	if _, ok := eps["embeddings"].(map[string]any)["generation"]; ok {
		t.Error("embeddings carry generation figures")
	}

	var h bytes.Buffer
	if err := s.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h2 id="endpoint-chat">`, `<h2 id="endpoint-embeddings">`, `<h2 id="endpoint-rerank">`, `id="ttft-cdf"`} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("html lacks %q", want)
		}
	}

	cs := filepath.Join(dir, "req.csv")
	if err := s.WritePerRequest(cs); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(cs)
	lines, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(lines[0], "endpoint")
	var eps2 []string
	for _, l := range lines[1:] {
		eps2 = append(eps2, l[col])
	}
	if !slices.Equal(eps2, []string{"chat", "embeddings", "rerank", "chat", "embeddings", "rerank"}) {
		t.Errorf("endpoint column %v", eps2)
	}
}

func sortedKeys(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	slices.Sort(k)
	return k
}

// Two generating endpoints: each keeps its own gaps; the run pools both.
func TestTwoGeneratingEndpointsSplitITL(t *testing.T) {
	recs := append(mixedRecords()[:1], responsesRecords()[:2]...) // chat c1 (gaps 100 100), responses a, b
	for _, itl := range []ITLMode{ITLPerEvent, ITLPerToken} {
		s := Records(recs, trace.RunMeta{}, Options{ITL: itl})
		chat, resp := endpointOf(t, s, "chat").Generation, endpointOf(t, s, "responses").Generation
		if itl == ITLPerEvent {
			near(t, "chat itl", chat.ITL.Mean, 100)
			near(t, "responses itl", resp.ITL.Mean, 600.0/6) // 50 50 100 100 200 100
			near(t, "run itl", s.ITL.Mean, 800.0/8)
			near(t, "run itl max", s.ITL.Max, 200)
			continue
		}
		// Per token: c1 100/2 100/1; a 50 50 100 100/2; b 200 100.
		near(t, "chat itl per token", chat.ITL.Mean, 75)
		near(t, "responses itl per token", resp.ITL.Mean, (50+50+100+50+200+100)/6.0)
		near(t, "run itl per token", s.ITL.Mean, (150+550)/8.0)
		if s.ITL.Count != 8 {
			t.Errorf("run per-token ITL count %d, want 8", s.ITL.Count)
		}
	}
}

// writeV3Recording writes recs as a recording of schema version 3 would
// be: without the endpoint, reasoning_tokens, first_answer_event and items
// columns, and with the event times as they are in column event_ns.
func writeV3Recording(t *testing.T, path string, meta trace.RunMeta, recs []trace.Record) {
	t.Helper()
	rt := reflect.TypeFor[trace.Record]()
	var fields []reflect.StructField
	var idx []int
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if slices.Contains([]string{"endpoint", "reasoning_tokens", "first_answer_event", "items"}, name) {
			continue
		}
		if name == "event_gap_us" {
			f.Tag = `parquet:"event_ns,list" parquet-element:",delta"`
		}
		fields, idx = append(fields, f), append(idx, i)
	}
	v3 := reflect.StructOf(fields)
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(f, parquet.SchemaOf(reflect.New(v3).Interface()),
		parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, strconv.Itoa(3)),
		parquet.KeyValueMetadata(trace.MetaRun, string(metaJSON)))
	for _, r := range recs {
		row := reflect.New(v3).Elem()
		src := reflect.ValueOf(r)
		for k, i := range idx {
			row.Field(k).Set(src.Field(i))
		}
		if err := w.Write(row.Addr().Interface()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A recording from before endpoints (schema 3) reads as it did: its rows
// are the run's --endpoint, reasoning unreported, and the report is the
// one the same rows give from today's writer.
func TestOlderRecordingReadsAsBefore(t *testing.T) {
	dir := t.TempDir()
	for _, ep := range []string{"", "chat", "completions"} {
		meta := trace.RunMeta{StartWallNs: 1_700_000_000e9}
		if ep != "" {
			meta.Config = map[string]any{"endpoint": ep}
		}
		old, cur := filepath.Join(dir, "old-"+ep+".parquet"), filepath.Join(dir, "cur-"+ep+".parquet")
		writeV3Recording(t, old, meta, handRecords())
		writeRecording(t, dir, filepath.Base(cur), meta, handRecords())
		opts := Options{Percentiles: []float64{50, 99}}
		so, err := Files([]string{old}, opts)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Files([]string{cur}, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := ep
		if want == "" {
			want = "chat"
		}
		if len(so.Endpoints) != 1 || so.Endpoints[0].Endpoint != want || so.ShowEndpoints() {
			t.Errorf("%q: endpoints %+v shown %v", ep, so.Endpoints, so.ShowEndpoints())
		}
		if g := so.Endpoints[0].Generation; g.ReasoningReporting != 0 || !reflect.DeepEqual(g.TTFO, g.TTFT) {
			t.Errorf("%q: reasoning reported by %d, TTFO %+v TTFT %+v", ep, g.ReasoningReporting, g.TTFO, g.TTFT)
		}
		// Today's writer has the column: its zeros are reported zeros.
		if n := sc.Endpoints[0].Generation.ReasoningReporting; n != 3 {
			t.Errorf("%q: today's file: reasoning reported by %d, want the 3 completed", ep, n)
		}
		if a, b := textOf(t, so), textOf(t, sc); a != b {
			t.Errorf("%q: the older recording's report differs:\n%s\n---\n%s", ep, a, b)
		}
		if strings.Contains(textOf(t, so), "Endpoint:") {
			t.Errorf("%q: a chat run shows endpoint sections", ep)
		}
	}
}

// A chat stream that opens with vLLM's role-only chunk answers from its
// second event: TTFO is later than TTFT, but nothing reasoned, so the chat
// run reads as before.
func TestRoleChunkIsNotReasoning(t *testing.T) {
	c := mixedRecords()[3] // c2: role-only chunk at 700, answer from 800
	c.FirstAnswerEvent = 1
	s := Records([]trace.Record{c}, trace.RunMeta{}, Options{})
	g := endpointOf(t, s, "chat").Generation
	near(t, "ttft", g.TTFT.Mean, 100)
	near(t, "ttfo", g.TTFO.Mean, 200)
	if s.ShowEndpoints() || strings.Contains(textOf(t, s), "Endpoint:") {
		t.Error("a chat run without reasoning shows endpoint sections")
	}
	// Tokens before the answer are reasoning: the sections appear.
	c.EventTokens[0] = 1
	if s := Records([]trace.Record{c}, trace.RunMeta{}, Options{}); !s.ShowEndpoints() {
		t.Error("a chat run that reasoned first shows no endpoint section")
	}
}

// A run of embeddings only: no TTFT tile on the page, its section instead.
func TestEmbeddingsOnlyHTML(t *testing.T) {
	recs := mixedRecords()
	s := Records([]trace.Record{recs[1], recs[4]}, trace.RunMeta{}, Options{})
	var h bytes.Buffer
	if err := s.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	page := h.String()
	if strings.Contains(page, "median TTFT") || !strings.Contains(page, `id="endpoint-embeddings"`) || !strings.Contains(page, "request throughput") {
		t.Errorf("embeddings-only page: TTFT tile %v, section %v", strings.Contains(page, "median TTFT"), strings.Contains(page, `id="endpoint-embeddings"`))
	}
	// A chat run keeps its tiles.
	var c bytes.Buffer
	if err := Records(handRecords(), trace.RunMeta{}, Options{}).WriteHTML(&c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.String(), "median TTFT") || strings.Contains(c.String(), `id="endpoint-`) {
		t.Error("chat page lost its TTFT tile or gained endpoint sections")
	}
}
