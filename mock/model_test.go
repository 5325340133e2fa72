package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestITLGrowsWithRunningSequences(t *testing.T) {
	l := Latency{DecodeBase: Duration(10 * time.Millisecond), DecodePerSeq: Duration(time.Millisecond)}
	if got := l.itl(nil, 1); got != 10*time.Millisecond {
		t.Fatalf("itl(1) = %v", got)
	}
	if got := l.itl(nil, 5); got != 14*time.Millisecond {
		t.Fatalf("itl(5) = %v, want 14ms", got)
	}
	if got := l.prefill(100); got != 0 {
		t.Fatalf("prefill with zero costs = %v", got)
	}
}

func TestJitterMeanIsOne(t *testing.T) {
	rng := requestRand(1, "x", 2)
	var sum float64
	const n = 20000
	for range n {
		sum += logNormal(rng, 0.5)
	}
	if m := sum / n; m < 0.97 || m > 1.03 {
		t.Fatalf("mean jitter factor %v, want 1", m)
	}
}

// TestTimingFollowsModel measures TTFT and ITL on the server log. Event
// stamps are taken after each write returned, so they are never early; the
// upper tolerance is loose because the machine is shared.
func TestTimingFollowsModel(t *testing.T) {
	const prefill, perTok, itl = 30 * time.Millisecond, 100 * time.Microsecond, 10 * time.Millisecond
	srv := startMock(t, func(c *Config) {
		c.Latency.PrefillBase, c.Latency.PrefillPerToken, c.Latency.DecodeBase = Duration(prefill), Duration(perTok), Duration(itl)
	})
	prompt := "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj" // 10 tokens
	resp := post(t, srv, "/v1/chat/completions", chatBody(20, true, "user", prompt), map[string]string{"X-Request-Id": "timed"})
	sse(resp)
	e := entryByID(t, srv, "timed")
	wantTTFT := prefill + 10*perTok
	ttft := time.Duration(e.EventMonoNs[1] - e.AdmitMonoNs)
	if ttft < wantTTFT || ttft > wantTTFT+25*time.Millisecond {
		t.Fatalf("TTFT %v, model says %v", ttft, wantTTFT)
	}
	if time.Duration(e.PlannedTTFTNs) < wantTTFT {
		t.Fatalf("planned TTFT %v < %v", time.Duration(e.PlannedTTFTNs), wantTTFT)
	}
	var gaps []time.Duration
	for i := 2; i < len(e.EventMonoNs); i++ {
		gaps = append(gaps, time.Duration(e.EventMonoNs[i]-e.EventMonoNs[i-1]))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < itl-2*time.Millisecond || med > itl+5*time.Millisecond {
		t.Fatalf("median ITL %v, model says %v (gaps %v)", med, itl, gaps)
	}
	// Event times are the schedule plus the logged lateness.
	for i := 2; i < len(e.EventMonoNs); i++ {
		planned := e.EventMonoNs[i] - e.EventLatenessNs[i] - (e.EventMonoNs[i-1] - e.EventLatenessNs[i-1])
		if time.Duration(planned) != itl {
			t.Fatalf("scheduled gap %d is %v, want exactly %v", i, time.Duration(planned), itl)
		}
	}
}

func TestBatchCapacityQueues(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.MaxNumSeqs = 1; c.Latency.DecodeBase = Duration(5 * time.Millisecond) })
	var wg sync.WaitGroup
	for _, id := range []string{"q1", "q2"} {
		wg.Go(func() {
			resp := post(t, srv, "/v1/chat/completions", chatBody(10, true, "user", "x"), map[string]string{"X-Request-Id": id})
			sse(resp)
		})
	}
	wg.Wait()
	a, b := entryByID(t, srv, "q1"), entryByID(t, srv, "q2")
	if b.AdmitMonoNs < a.AdmitMonoNs {
		a, b = b, a
	}
	if last := a.EventMonoNs[len(a.EventMonoNs)-1]; b.AdmitMonoNs < last {
		t.Fatalf("second request admitted at %d before the first finished at %d with max_num_seqs 1", b.AdmitMonoNs, last)
	}
	if queue := time.Duration(b.PlannedTTFTNs) - srv.cfg.Latency.prefill(int(b.PromptTokens)); queue < 40*time.Millisecond {
		t.Fatalf("queued request's TTFT has only %v of queueing", queue)
	}
}

func chatTurn(t *testing.T, srv *Server, id string, msgs ...string) (content string, cached int) {
	t.Helper()
	resp := post(t, srv, "/v1/chat/completions", chatBody(8, true, msgs...), map[string]string{"X-Request-Id": id})
	events, _, _ := sse(resp)
	for _, c := range parseChunks(t, events) {
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
			content += *c.Choices[0].Delta.Content
		}
		if c.Usage != nil {
			cached = c.Usage.PromptTokensDetails.CachedTokens
		}
	}
	return content, cached
}

func TestPrefixCacheHitsTurnTwo(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.PrefillPerToken = Duration(time.Millisecond) })
	sys, u1, u2 := "you are a kind bot", "tell me a long story about cats", "and dogs"
	answer, cached := chatTurn(t, srv, "t1", "system", sys, "user", u1)
	if cached != 0 {
		t.Fatalf("turn 1 cached %d tokens on a cold cache", cached)
	}
	_, cached = chatTurn(t, srv, "t2", "system", sys, "user", u1, "assistant", answer, "user", u2)
	want := ApproxTokens.Count(sys) + ApproxTokens.Count(u1) + ApproxTokens.Count(answer)
	if cached != want {
		t.Fatalf("turn 2 cached %d tokens, want %d (system + user 1 + answer 1)", cached, want)
	}
	e1, e2 := entryByID(t, srv, "t1"), entryByID(t, srv, "t2")
	if e2.CachedTokens != int32(want) || e2.PlannedTTFTNs >= e1.PlannedTTFTNs+int64(2*time.Millisecond) {
		t.Fatalf("turn 2: cached %d, planned TTFT %v vs turn 1 %v", e2.CachedTokens, time.Duration(e2.PlannedTTFTNs), time.Duration(e1.PlannedTTFTNs))
	}
	// A different history misses; a reset empties the cache.
	if _, c := chatTurn(t, srv, "t3", "system", "other", "user", u1); c != 0 {
		t.Fatalf("different system prompt hit %d tokens", c)
	}
	resp, err := http.Post(srv.URL()+"/reset_prefix_cache", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reset: %v", err)
	}
	resp.Body.Close()
	if _, c := chatTurn(t, srv, "t4", "system", sys, "user", u1); c != 0 {
		t.Fatalf("after reset cached %d", c)
	}
}

func TestPrefixCacheLRU(t *testing.T) {
	c := newPrefixCache(10)
	a := []segment{{1, 4}, {2, 8}}
	c.insert(a)
	if got := c.lookup(a); got != 8 {
		t.Fatalf("lookup = %d, want 8", got)
	}
	c.insert([]segment{{3, 6}}) // 14 tokens > 10: evicts a's tail (segment 2) first
	if got := c.lookup(a); got != 4 {
		t.Fatalf("after eviction lookup = %d, want 4 (head kept, tail evicted)", got)
	}
	if got := c.lookup([]segment{{9, 3}, {1, 4}}); got != 0 {
		t.Fatalf("a chain starting with a miss hit %d", got)
	}
	if c.used > c.capacity {
		t.Fatalf("used %d > capacity %d", c.used, c.capacity)
	}
}

func TestOpenAISDKStreaming(t *testing.T) {
	srv := startMock(t, nil)
	client := openai.NewClient(option.WithBaseURL(srv.URL()+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "tracekit-mock",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")},
		MaxTokens:     openai.Int(12),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("SDK stream: %v", err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("no content: %+v", acc.ChatCompletion)
	}
	e := srv.Log()[0]
	want, _ := GeneratedText(srv.cfg.Seed, e.MessagesHash, int(e.CompletionTokens)-btoi(e.FinishReason == "stop"))
	if acc.Choices[0].Message.Content != want {
		t.Fatalf("content %q, want %q", acc.Choices[0].Message.Content, want)
	}
	if p := int64(ApproxTokens.Count("say something")); acc.Usage.PromptTokens != p || acc.Usage.CompletionTokens != int64(e.CompletionTokens) || acc.Usage.TotalTokens != p+int64(e.CompletionTokens) {
		t.Fatalf("usage %+v, log says %d completion tokens", acc.Usage, e.CompletionTokens)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestParquetLogMatchesMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.parquet")
	cfg := fastConfig()
	cfg.LogPath = path
	srv, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		resp := post(t, srv, "/v1/chat/completions", chatBody(4, true, "user", "hello "+id), map[string]string{"X-Request-Id": id})
		sse(resp)
	}
	post(t, srv, "/v1/chat/completions", `{bad`, nil)
	mem := srv.Log()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	rows, meta, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || len(mem) != 4 {
		t.Fatalf("%d rows in file, %d in memory, want 4", len(rows), len(mem))
	}
	for i := range rows {
		if len(rows[i].EventMonoNs) == 0 { // Parquet reads an empty list, memory has nil
			rows[i].EventMonoNs, rows[i].EventTokens, rows[i].EventLatenessNs = nil, nil, nil
		}
		a, _ := json.Marshal(rows[i])
		b, _ := json.Marshal(mem[i])
		if string(a) != string(b) {
			t.Fatalf("row %d differs:\nfile   %s\nmemory %s", i, a, b)
		}
	}
	if meta.StartMonoNs == 0 || meta.StartWallNs == 0 || meta.URL != srv.URL() || meta.Config.Latency.DecodeBase != cfg.Latency.DecodeBase {
		t.Fatalf("meta %+v", meta)
	}
	if meta.Stats == nil || meta.Stats.Events != 15 || meta.Stats.Requests != 4 {
		t.Fatalf("meta stats %+v, want 15 events of 4 requests", meta.Stats)
	}
	if _, _, err := ReadLog(filepath.Join(t.TempDir(), "missing.parquet")); err == nil {
		t.Fatal("ReadLog of a missing file succeeded")
	}
}

func TestCloseCutsInFlightStreams(t *testing.T) {
	cfg := fastConfig()
	cfg.LogPath = filepath.Join(t.TempDir(), "log.parquet")
	cfg.Latency.DecodeBase = Duration(50 * time.Millisecond)
	srv, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, srv, "/v1/chat/completions", chatBody(1000, true, "user", "x"), map[string]string{"X-Request-Id": "long"})
	time.Sleep(100 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	_, done, _ := sse(resp)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if done {
		t.Fatal("a cut stream ended with [DONE]")
	}
	rows, _, err := ReadLog(cfg.LogPath)
	if err != nil || len(rows) != 1 || rows[0].Outcome != OutcomeCanceled || len(rows[0].EventMonoNs) == 0 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
}

// TestEventEncodingAllocatesNothing pins the hot path: encoding an event
// reuses the stream's buffer.
func TestEventEncodingAllocatesNothing(t *testing.T) {
	x := &exchange{s: &Server{cfg: fastConfig()}, chat: true, req: &apiRequest{}}
	x.req.StreamOptions = &struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	}{true, true}
	x.e = LogEntry{RequestID: "r", Model: "m", CompletionTokens: 100, FinishReason: "length"}
	x.buildHeads()
	x.buf = x.appendEvent(x.buf[:0], 0, 4, false)
	if !json.Valid(x.buf[len("data: ") : len(x.buf)-2]) {
		t.Fatalf("invalid event %q", x.buf)
	}
	if n := testing.AllocsPerRun(100, func() { x.buf = x.appendEvent(x.buf[:0], 10, 14, false) }); n != 0 {
		t.Fatalf("%v allocations per event", n)
	}
}
