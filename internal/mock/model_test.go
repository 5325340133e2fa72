package mock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/chat"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tracekit/tracekit/trace"
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

// TestTimingFollowsModel checks the schedule on the server log: an event
// is due at its stamp minus its logged lateness, that due time follows the
// model exactly, and stamps are never early (an early write would log no
// lateness and break the exact gaps). How late writes are depends on the
// machine's load and is the benchmarks' business.
func TestTimingFollowsModel(t *testing.T) {
	const prefill, perTok, itl = 30 * time.Millisecond, 100 * time.Microsecond, 10 * time.Millisecond
	srv := startMock(t, func(c *Config) {
		c.Latency.PrefillBase, c.Latency.PrefillPerToken, c.Latency.DecodeBase = Duration(prefill), Duration(perTok), Duration(itl)
	})
	prompt := "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj" // 10 tokens
	resp := post(t, srv, "/v1/chat/completions", chatBody(20, true, "user", prompt), map[string]string{"X-Request-Id": "timed"})
	sse(resp)
	e := entryByID(t, srv, "timed")
	due := func(i int) int64 { return e.EventMonoNs[i] - e.EventLatenessNs[i] }
	wantTTFT := prefill + 10*perTok
	if got := time.Duration(due(1) - e.AdmitMonoNs); got != wantTTFT {
		t.Fatalf("first token due %v after admission, model says %v", got, wantTTFT)
	}
	if due(0) != due(1) {
		t.Fatalf("the role chunk is due %v before the first token, want together", time.Duration(due(1)-due(0)))
	}
	if queue := e.AdmitMonoNs - e.ArrivalMonoNs; time.Duration(e.PlannedTTFTNs-queue) != wantTTFT {
		t.Fatalf("planned TTFT %v is not queueing %v + the model's %v", time.Duration(e.PlannedTTFTNs), time.Duration(queue), wantTTFT)
	}
	for i := 2; i < len(e.EventMonoNs); i++ {
		if got := time.Duration(due(i) - due(i-1)); got != itl {
			t.Fatalf("event %d due %v after the previous, want exactly %v", i, got, itl)
		}
	}
	for i, late := range e.EventLatenessNs {
		if late < 0 || e.EventMonoNs[i] < e.AdmitMonoNs {
			t.Fatalf("event %d: stamp %d, lateness %d", i, e.EventMonoNs[i], late)
		}
	}
}

// TestBatchCapacityQueues: with max_num_seqs 1, a request arriving while
// another runs waits (num_requests_waiting says so) and is admitted only
// after the running one has ended; its planned TTFT is its queueing plus
// its prefill. Asserted on the log's order, not on durations.
func TestBatchCapacityQueues(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.MaxNumSeqs = 1 })
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	body, _ := json.Marshal(chatBody(10000, true, "user", "long")) // 20 s of tokens: runs until its client leaves
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", "q1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event of q1: %q, %v", line, err)
	}
	queued := make(chan error, 1)
	go func() { queued <- postDrain(srv, chatBody(3, true, "user", "short"), "q2") }()
	waitFor(t, "q2 to wait for the batch slot", func() bool { return srv.Stats().Waiting == 1 })
	leave()
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	a, b := entryByID(t, srv, "q1"), entryByID(t, srv, "q2")
	if a.Outcome != OutcomeClientGone || b.Outcome != OutcomeOK {
		t.Fatalf("outcomes %s, %s", a.Outcome, b.Outcome)
	}
	if !(b.ArrivalMonoNs < a.DoneMonoNs && a.DoneMonoNs <= b.AdmitMonoNs) {
		t.Fatalf("q2 arrived %d, admitted %d; q1 ended %d: want q2 admitted only after q1 ended", b.ArrivalMonoNs, b.AdmitMonoNs, a.DoneMonoNs)
	}
	prefill := srv.cfg.Latency.prefill(int(b.PromptTokens - b.CachedTokens))
	if queue := b.AdmitMonoNs - b.ArrivalMonoNs; time.Duration(b.PlannedTTFTNs-queue) != prefill {
		t.Fatalf("q2 planned TTFT %v, queueing %v, prefill %v", time.Duration(b.PlannedTTFTNs), time.Duration(queue), prefill)
	}
}

// TestBatchNeverExceedsCapacity: whenever a request is admitted, fewer
// than max_num_seqs other admitted requests are still unfinished (a slot
// is released only after its entry is recorded), checked on the log of
// concurrent requests whatever their timing.
func TestBatchNeverExceedsCapacity(t *testing.T) {
	const seqs, n = 2, 6
	srv := startMock(t, func(c *Config) { c.Latency.MaxNumSeqs = seqs })
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- postDrain(srv, chatBody(5, i%2 == 0, "user", "x"), fmt.Sprint("c", i)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	log := srv.Log()
	if len(log) != n {
		t.Fatalf("%d entries", len(log))
	}
	for _, r := range log {
		holding := 0
		for _, o := range log {
			if o.RequestID != r.RequestID && o.AdmitMonoNs < r.AdmitMonoNs && o.DoneMonoNs > r.AdmitMonoNs {
				holding++
			}
		}
		if holding > seqs-1 || r.Outcome != OutcomeOK {
			t.Fatalf("%s admitted while %d others held slots (max_num_seqs %d), outcome %s", r.RequestID, holding, seqs, r.Outcome)
		}
	}
}

// postDrain sends a chat request with the given id and reads the whole
// response; it does not touch t, so goroutines may call it.
func postDrain(srv *Server, body map[string]any, id string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest("POST", srv.URL()+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
		return fmt.Errorf("%s: status %d, %v", id, resp.StatusCode, err)
	}
	return nil
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
	// The planned prefill is the planned TTFT less the queueing.
	prefill := func(e LogEntry) time.Duration {
		return time.Duration(e.PlannedTTFTNs - (e.AdmitMonoNs - e.ArrivalMonoNs))
	}
	if e2.CachedTokens != int32(want) || prefill(e2) != srv.cfg.Latency.prefill(int(e2.PromptTokens)-want) || prefill(e2) >= prefill(e1) {
		t.Fatalf("turn 2: cached %d, planned prefill %v vs turn 1 %v", e2.CachedTokens, prefill(e2), prefill(e1))
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
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
	other := filepath.Join(t.TempDir(), "trace.parquet")
	if err := trace.WriteTrace(other, trace.TraceMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadLog(other); !errors.Is(err, trace.ErrWrongFormat) || !strings.Contains(err.Error(), FormatLog) {
		t.Fatalf("ReadLog of a trace: %v, want a wrong-format error naming %s", err, FormatLog)
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
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q, %v", line, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	_, done, _ := sse(&http.Response{Body: io.NopCloser(br)})
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // hang guard
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
// (text and a tool call's arguments) reuses the stream's buffers.
func TestEventEncodingAllocatesNothing(t *testing.T) {
	for _, tools := range [][]string{nil, {"search"}} {
		x := &exchange{s: &Server{cfg: fastConfig()}, api: api.Chat, enc: chat.NewEncoder(), toolNames: tools,
			req: &genRequest{IncludeUsage: true, ContinuousUsage: true}}
		x.e = LogEntry{RequestID: "r", Model: "m", CompletionTokens: 1 << 20, FinishReason: "length"}
		x.buildHead()
		x.role = true
		x.buf = x.appendEvent(x.buf[:0])
		x.role, x.tok, x.take = false, 0, 4
		x.buf = x.appendEvent(x.buf[:0])
		if !json.Valid(x.buf[len("data: ") : len(x.buf)-2]) {
			t.Fatalf("invalid event %q", x.buf)
		}
		if n := testing.AllocsPerRun(100, func() { x.tok += 4; x.buf = x.appendEvent(x.buf[:0]) }); n != 0 {
			t.Fatalf("tools %v: %v allocations per event", tools, n)
		}
	}
}
