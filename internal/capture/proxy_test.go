package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

const secret = "sk-tracekit-SECRET-do-not-write"

var (
	testTok   = tokenizer.Default()
	clockMono = clock.Mono
)

// fastMock is the test mock with short answers: the proxy's clients ask
// for no length, so the mock draws one.
func fastMock(t *testing.T) *mock.Server {
	t.Helper()
	return mocktest.Start(t, func(c *mock.Config) { c.Latency.OutputMean = 6 })
}

// stacks are the HTTP layers the proxy tests run on: each must forward
// the same bytes and record the same.
var stacks = []struct {
	name  string
	stack h1proxy.Stack
}{{"native", h1proxy.Native}, {"nethttp", h1proxy.NetHTTP}}

// eachStack runs test once per stack, as a subtest named after it.
func eachStack(t *testing.T, test func(t *testing.T, stack h1proxy.Stack)) {
	for _, s := range stacks {
		t.Run(s.name, func(t *testing.T) { test(t, s.stack) })
	}
}

// startProxy starts a proxy on stack in front of upstream, its files in a
// new directory (returned); mod changes its configuration first.
func startProxy(t *testing.T, stack h1proxy.Stack, upstream string, mod func(*ProxyConfig)) (*ProxyServer, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := ProxyConfig{Upstream: upstream, OutDir: dir, Tokenizer: testTok, SyncEvery: 100 * time.Millisecond, Stack: stack}
	if mod != nil {
		mod(&cfg)
	}
	ps, err := StartProxy(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return ps, dir
}

type msg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func chatBody(msgs []msg, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "tracekit-mock", "messages": msgs, "stream": stream, "max_tokens": 8,
		"stream_options": map[string]any{"include_usage": true},
	})
	if !stream {
		b, _ = json.Marshal(map[string]any{"model": "tracekit-mock", "messages": msgs, "max_tokens": 8})
	}
	return string(b)
}

// post sends body to base+path with net/http and returns status, headers
// and the whole body.
func post(t *testing.T, base, path, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, b
}

var createdRE = regexp.MustCompile(`"created":\d+`)

// sseAnswer extracts the content and the count of choice events with an
// independent, simple parse (json.Unmarshal per event).
func sseAnswer(t *testing.T, body []byte) (string, int) {
	t.Helper()
	var text strings.Builder
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("bad event %q: %v", d, err)
		}
		if len(c.Choices) > 0 {
			n++
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String(), n
}

func readTrace(t *testing.T, path string) []trace.Turn {
	t.Helper()
	rows, _, err := trace.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func noSecretIn(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) == 0 {
		t.Fatal("no files written")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("SECRET")) {
			t.Fatalf("%s contains the API key", f)
		}
	}
}

// TestProxyConversations drives multi-turn chats through the proxy with
// net/http, compares every response with the same request sent directly,
// and checks the trace and the recording written.
func TestProxyConversations(t *testing.T) { eachStack(t, testProxyConversations) }

func testProxyConversations(t *testing.T, stack h1proxy.Stack) {
	// Two identical mocks see the same requests (prefix cache state
	// included): one through the proxy, one directly.
	up, direct := fastMock(t), fastMock(t)
	ps, dir := startProxy(t, stack, up.URL(), nil)
	const convs, turns, think = 3, 3, 40 * time.Millisecond
	type seen struct {
		events int
		text   string
	}
	var client []seen
	for c := range convs {
		hist := []msg{{"system", "You are terse."}, {"user", fmt.Sprintf("conversation %d, question 0", c)}}
		for k := range turns {
			id := fmt.Sprintf("r-%d-%d", c, k)
			body := chatBody(hist, true)
			st, hdr, got := post(t, ps.URL(), "/v1/chat/completions", body, map[string]string{"X-Request-Id": id})
			_, dhdr, direct := post(t, direct.URL(), "/v1/chat/completions", body, map[string]string{"X-Request-Id": id})
			if st != 200 || hdr.Get("Content-Type") != dhdr.Get("Content-Type") || hdr.Get("X-Request-Id") != id {
				t.Fatalf("status %d headers %v", st, hdr)
			}
			if createdRE.ReplaceAllString(string(got), "") != createdRE.ReplaceAllString(string(direct), "") {
				t.Fatalf("proxied body differs from direct:\n%s\n---\n%s", got, direct)
			}
			text, n := sseAnswer(t, got)
			client = append(client, seen{n, text})
			hist = append(hist, msg{"assistant", text}, msg{"user", fmt.Sprintf("conversation %d, question %d", c, k+1)})
			time.Sleep(think)
		}
	}
	// A non-LLM path passes through untouched and is not recorded.
	resp, err := http.Get(ps.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(models, []byte("tracekit-mock")) {
		t.Fatalf("/v1/models through the proxy: %d %s", resp.StatusCode, models)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 1 || segs[0].Requests != convs*turns {
		t.Fatalf("segments %+v", segs)
	}
	rows := readTrace(t, segs[0].Trace)
	if len(rows) != convs*turns {
		t.Fatalf("%d trace rows", len(rows))
	}
	for i, r := range rows {
		c, k := i/turns, i%turns
		if r.Turn != int32(k) || r.ConversationID != rows[c*turns].ConversationID {
			t.Fatalf("row %d: conversation %s turn %d; want turn %d of the conversation of row %d", i, r.ConversationID, r.Turn, k, c*turns)
		}
		wantMsgs := 1
		if k == 0 {
			wantMsgs = 2 // system + first user message
			if r.ThinkTimeNs != 0 || r.ArrivalOffsetNs != r.StartOffsetNs {
				t.Fatalf("row %d: first turn think %d arrival %d start %d", i, r.ThinkTimeNs, r.ArrivalOffsetNs, r.StartOffsetNs)
			}
		} else if r.ThinkTimeNs < int64(think) || r.ThinkTimeNs > int64(think)+int64(400*time.Millisecond) {
			t.Fatalf("row %d: think time %v, the client slept %v (plus a direct request)", i, time.Duration(r.ThinkTimeNs), think)
		}
		if len(r.Messages) != wantMsgs || r.Messages[len(r.Messages)-1].Content != fmt.Sprintf("conversation %d, question %d", c, k) {
			t.Fatalf("row %d: messages %+v", i, r.Messages)
		}
		if r.ReferenceAnswer != client[i].text || r.InputTokens <= 0 || r.OutputTokens <= 0 || r.Model != "tracekit-mock" {
			t.Fatalf("row %d: answer %q (client saw %q) input %d output %d model %q", i, r.ReferenceAnswer, client[i].text, r.InputTokens, r.OutputTokens, r.Model)
		}
	}
	recs, meta := readRecordsT(t, segs[0].Recording)
	if len(recs) != convs*turns || meta.StartMonoNs == 0 || meta.Trace == nil || meta.Trace.Source != "capture" {
		t.Fatalf("%d records, meta %+v", len(recs), meta)
	}
	byID := map[string]trace.Record{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	for i := range convs * turns {
		r, ok := byID[fmt.Sprintf("r-%d-%d", i/turns, i%turns)]
		if !ok {
			t.Fatalf("no record for request %d", i)
		}
		if r.ErrorKind != "" || r.Status != 200 || len(r.EventNs) != client[i].events || r.CompletionTokens <= 0 || r.PromptTokens <= 0 {
			t.Fatalf("record %d: %+v; client saw %d events", i, r, client[i].events)
		}
		if r.ConversationID != rows[i].ConversationID || r.Turn != rows[i].Turn {
			t.Fatalf("record %d is %s/%d, trace row %s/%d", i, r.ConversationID, r.Turn, rows[i].ConversationID, rows[i].Turn)
		}
		// The events are kept to the microsecond: compared with the
		// other times as the recording would keep those.
		at := func(ns int64) int64 { return trace.StoredEventTime(r.SentNs, ns) }
		if !(r.SentNs >= r.IntendedNs && r.HeadersNs >= r.SentNs && r.EventNs[0] >= at(r.HeadersNs) && at(r.DoneNs) >= r.EventNs[len(r.EventNs)-1]) {
			t.Fatalf("record %d: times out of order: %+v", i, r)
		}
	}
	noSecretIn(t, dir)
}

// TestProxyClients drives the official OpenAI SDK and fasthttp through the
// proxy; both get what they get directly.
func TestProxyClients(t *testing.T) { eachStack(t, testProxyClients) }

func testProxyClients(t *testing.T, stack h1proxy.Stack) {
	up, direct := fastMock(t), fastMock(t)
	ps, dir := startProxy(t, stack, up.URL(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var answers [2]string
	for i, base := range []string{ps.URL(), direct.URL()} {
		client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(secret), option.WithMaxRetries(0), option.WithHeader("X-Request-Id", "sdk-1"))
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
			t.Fatalf("SDK via %s: %v", base, err)
		}
		answers[i] = acc.Choices[0].Message.Content
	}
	if answers[0] == "" || answers[0] != answers[1] {
		t.Fatalf("SDK answers differ: proxied %q direct %q", answers[0], answers[1])
	}
	// fasthttp, non-streaming.
	var bodies [2]string
	for i, base := range []string{ps.URL(), direct.URL()} {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(base + "/v1/chat/completions")
		req.Header.SetMethod("POST")
		req.Header.Set("X-Request-Id", "fh-1")
		req.Header.Set("Authorization", "Bearer "+secret)
		req.SetBodyString(chatBody([]msg{{"user", "non-streaming please"}}, false))
		if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			t.Fatalf("fasthttp via %s: %d %s", base, resp.StatusCode(), resp.Body())
		}
		bodies[i] = createdRE.ReplaceAllString(string(resp.Body()), "")
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	if bodies[0] != bodies[1] {
		t.Fatalf("fasthttp bodies differ:\n%s\n%s", bodies[0], bodies[1])
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.ErrorKind != "" || len(r.EventNs) == 0 || r.CompletionTokens <= 0 {
			t.Fatalf("record %+v", r)
		}
		if r.RequestID == "fh-1" && (len(r.EventNs) != 1 || !r.TokensExact || r.EventTokens[0] != r.CompletionTokens) {
			t.Fatalf("non-streaming record %+v", r)
		}
	}
	noSecretIn(t, dir)
}

// TestProxyFaults: the client gets each upstream failure as it happened,
// the recording names it, and the proxy keeps serving.
func TestProxyFaults(t *testing.T) { eachStack(t, testProxyFaults) }

func testProxyFaults(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	body := chatBody([]msg{{"user", "fault me"}}, true)
	send := func(fault string) (int, []byte, error) {
		req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set(mock.FaultHeader, fault)
		req.Header.Set("X-Request-Id", "f-"+fault)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	if st, b, err := send("status=503"); err != nil || st != 503 {
		t.Fatalf("status fault: %d %s %v", st, b, err)
	}
	if _, _, err := send("disconnect=2"); err == nil {
		t.Fatal("upstream disconnect mid-stream did not reach the client as an error")
	}
	if st, b, err := send("malformed@2"); err != nil || st != 200 || !bytes.Contains(b, []byte("[DONE]")) {
		t.Fatalf("malformed fault: %d %v", st, err)
	}
	if st, _, err := send("nodone"); err != nil || st != 200 {
		t.Fatalf("nodone fault: %d %v", st, err)
	}
	st, _, err := send("reset")
	if err == nil && st != http.StatusBadGateway {
		t.Fatalf("reset: client got %d, want an error or 502", st)
	}
	if st, _, err := send(""); err != nil || st != 200 {
		t.Fatalf("after faults: %d %v", st, err)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	kinds := map[string]trace.ErrorKind{}
	for _, r := range recs {
		kinds[r.RequestID] = r.ErrorKind
	}
	want := map[string]trace.ErrorKind{
		"f-status=503": trace.ErrHTTPStatus, "f-disconnect=2": trace.ErrStreamTruncated,
		"f-malformed@2": trace.ErrMalformed, "f-nodone": trace.ErrStreamTruncated, "f-": "",
	}
	for id, k := range want {
		if got, ok := kinds[id]; !ok || got != k {
			t.Errorf("%s recorded as %q (present %v), want %q", id, got, ok, k)
		}
	}
	if k := kinds["f-reset"]; k != trace.ErrConnect && k != trace.ErrStreamTruncated {
		t.Errorf("reset recorded as %q", k)
	}
}

// TestProxyUpstreamRefused: nothing listens upstream; the client gets a 502
// with a JSON error, the recording says connect, the proxy stays up.
func TestProxyUpstreamRefused(t *testing.T) { eachStack(t, testProxyUpstreamRefused) }

func testProxyUpstreamRefused(t *testing.T, stack h1proxy.Stack) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ps, _ := startProxy(t, stack, dead, nil)
	for range 2 {
		st, _, b := post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", "hello?"}}, true), nil)
		if st != http.StatusBadGateway || !bytes.Contains(b, []byte("upstream unreachable")) {
			t.Fatalf("got %d %s", st, b)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 2 || recs[0].ErrorKind != trace.ErrConnect || strings.Contains(recs[0].ErrorMessage, secret) {
		t.Fatalf("records %+v", recs)
	}
}

// TestProxyFlushesEachEvent: an upstream that pauses between events; the
// client must see each event before the next is sent.
func TestProxyFlushesEachEvent(t *testing.T) { eachStack(t, testProxyFlushesEachEvent) }

func testProxyFlushesEachEvent(t *testing.T, stack h1proxy.Stack) {
	release := make(chan struct{})
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no key", 401)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\" second\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	ps, _ := startProxy(t, stack, up.URL, func(c *ProxyConfig) { c.Transport = up.Client().Transport })
	req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(chatBody([]msg{{"user", "x"}}, true)))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "first") {
		t.Fatalf("first event not delivered before the upstream continued: %q %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("rest %q", rest)
	}
	ps.Close()
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 1 || len(recs[0].EventNs) != 2 || recs[0].EventNs[1]-recs[0].EventNs[0] <= 0 || recs[0].ErrorKind != "" {
		t.Fatalf("records %+v", recs)
	}
}

// TestProxyRotation: each segment is a valid pair of files, and a
// conversation crossing into a new segment starts there with its history.
func TestProxyRotation(t *testing.T) { eachStack(t, testProxyRotation) }

func testProxyRotation(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), func(c *ProxyConfig) { c.RotateEvery = 150 * time.Millisecond })
	hist := []msg{{"user", "q0"}}
	for k := range 3 {
		_, _, b := post(t, ps.URL(), "/v1/chat/completions", chatBody(hist, true), nil)
		text, _ := sseAnswer(t, b)
		hist = append(hist, msg{"assistant", text}, msg{"user", fmt.Sprintf("q%d", k+1)})
		time.Sleep(200 * time.Millisecond)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 3 {
		t.Fatalf("segments %+v, want 3", segs)
	}
	for i, s := range segs {
		rows := readTrace(t, s.Trace)
		recs, _ := readRecordsT(t, s.Recording)
		if len(rows) != 1 || len(recs) != 1 || rows[0].Turn != 0 || len(rows[0].Messages) != 1+2*i {
			t.Fatalf("segment %d: %d rows %d records; row %+v", i, len(rows), len(recs), rows)
		}
	}
}

// TestProxySessionHeaderAndRedaction groups by a session header and keeps
// no text in the trace.
func TestProxySessionHeaderAndRedaction(t *testing.T) {
	eachStack(t, testProxySessionHeaderAndRedaction)
}

func testProxySessionHeaderAndRedaction(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, dir := startProxy(t, stack, up.URL(), func(c *ProxyConfig) { c.SessionHeader = "X-Session"; c.RedactContent = true })
	for _, q := range []string{"alpha-private shared system prompt that is long enough to fill more than one block of tokens", "beta-private"} {
		// Histories that do not chain (the client rewrites them): only the
		// header can group these.
		post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", q}}, true), map[string]string{"X-Session": "s1"})
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	rows := readTrace(t, ps.Proxy().Segments()[0].Trace)
	if len(rows) != 2 || rows[0].ConversationID != "s1" || rows[1].ConversationID != "s1" || rows[1].Turn != 1 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.Messages[0].Content != "" || r.Messages[0].Tokens <= 0 || r.ReferenceAnswer != "" || len(r.PrefixHashes) == 0 {
			t.Fatalf("redacted row keeps text or lacks hashes: %+v", r)
		}
	}
	if rows[0].PrefixHashes[0] == rows[1].PrefixHashes[0] {
		t.Fatal("different prompts share their first block hash")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("alpha-private")) {
			t.Fatalf("%s contains redacted text", f)
		}
	}
}

// TestProxyStampsPrecedeClient: for every event the proxy's stamp (its
// upstream read) precedes the client's (its read of the forwarded bytes),
// and both saw the same events: the recording is the upstream's timing.
func TestProxyStampsPrecedeClient(t *testing.T) { eachStack(t, testProxyStampsPrecedeClient) }

func testProxyStampsPrecedeClient(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	client := map[string][]int64{}
	for i := range 4 {
		id := fmt.Sprintf("s-%d", i)
		req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(chatBody([]msg{{"user", id}}, true)))
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		s := record.NewStream(nil)
		if err := s.ReadBody(resp.Body, make([]byte, 4096), clockMono); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var rec trace.Record
		s.Fill(&rec)
		client[id] = rec.EventNs
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, meta := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	for _, r := range recs {
		c := client[r.RequestID]
		if len(c) == 0 || len(c) != len(r.EventNs) {
			t.Fatalf("%s: client saw %d events, proxy recorded %d", r.RequestID, len(c), len(r.EventNs))
		}
		for i, ts := range r.EventNs {
			if abs := ts + meta.StartMonoNs; abs > c[i] {
				t.Fatalf("%s event %d: proxy stamp %d after the client's %d", r.RequestID, i, abs, c[i])
			}
		}
	}
}

// TestProxySIGKILLRecover kills a real capture process after three turns of
// one conversation: tracekit recover's code turns what it left into a
// valid trace and recording holding all three.
func TestProxySIGKILLRecover(t *testing.T) {
	up := fastMock(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRACEKIT_PROXY_CHILD="+dir, "TRACEKIT_PROXY_UPSTREAM="+up.URL())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("child said %q (%v)", line, err)
	}
	base := strings.TrimSpace(line)
	hist := []msg{{"user", "q0"}}
	for k := range 3 {
		_, _, b := post(t, base, "/v1/chat/completions", chatBody(hist, true), nil)
		text, _ := sseAnswer(t, b)
		hist = append(hist, msg{"assistant", text}, msg{"user", fmt.Sprintf("q%d", k+1)})
	}
	// Kill once the journals hold the three turns: what a journal holds
	// survives SIGKILL, and a loaded machine may take longer than any fixed
	// number of sync periods to write it.
	waitJournals(t, dir, 3, 3)
	// While capture lives, recover leaves its journals alone.
	var le *record.LockedError
	if res, err := record.RecoverAll(dir, ""); !errors.As(err, &le) || le.PID != cmd.Process.Pid || len(res) != 0 {
		t.Fatalf("recovering a live capture's directory: %+v, %v; want both journals refused naming pid %d", res, err, cmd.Process.Pid)
	}
	waitJournals(t, dir, 3, 3)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	res, err := record.RecoverAll(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var traces, recs int
	for _, r := range res {
		if r.Trace {
			traces++
			rows := readTrace(t, r.Out)
			if len(rows) != 3 || rows[2].Turn != 2 || rows[2].ConversationID != rows[0].ConversationID || rows[2].ThinkTimeNs <= 0 {
				t.Fatalf("recovered trace rows %+v", rows)
			}
		} else {
			recs++
			got, _ := readRecordsT(t, r.Out)
			if len(got) != 3 {
				t.Fatalf("recovered %d records", len(got))
			}
		}
	}
	if traces != 1 || recs != 1 {
		t.Fatalf("results %+v", res)
	}
	noSecretIn(t, dir)
}

// TestProxyTraceJournalSlowFsync: a finished turn reaches the trace
// journal's file at once, whatever the disk does with fsync. The child's
// every trace-journal fsync takes a minute (a disk far slower than
// --sync-every): once the first turn is in the journal the syncing
// goroutine waits in its fsync, and the later turns, finished more than
// sync-every (50 ms in the child) before a SIGKILL, must still all be
// recovered.
func TestProxyTraceJournalSlowFsync(t *testing.T) {
	up := fastMock(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRACEKIT_PROXY_CHILD="+dir, "TRACEKIT_PROXY_UPSTREAM="+up.URL(), "TRACEKIT_PROXY_SLOW_FSYNC=1")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("child said %q (%v)", line, err)
	}
	base := strings.TrimSpace(line)
	const n = 6
	hist := []msg{{"user", "q0"}}
	turn := func(k int) {
		_, _, b := post(t, base, "/v1/chat/completions", chatBody(hist, true), nil)
		text, _ := sseAnswer(t, b)
		hist = append(hist, msg{"assistant", text}, msg{"user", fmt.Sprintf("q%d", k+1)})
	}
	turn(0)
	waitJournals(t, dir, 1, 1) // flushed and synced once: the next fsync is the slow one
	for k := 1; k < n; k++ {
		turn(k)
	}
	// Every turn is accounted once its record is in the recording's
	// journal (the record is handed over just before the turn); then more
	// than a sync period passes before the kill.
	waitJournals(t, dir, n, 1)
	time.Sleep(4 * 50 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	res, err := record.RecoverAll(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	traces := 0
	for _, r := range res {
		if r.Trace {
			traces++
			if r.Records != n {
				t.Fatalf("recovered %d of the %d turns finished before the kill from %s", r.Records, n, r.Journal)
			}
		}
	}
	if traces != 1 {
		t.Fatalf("results %+v: want one trace journal", res)
	}
}

// waitJournals waits (at most 30 s, a hang guard) until the journals in
// dir hold at least records records and turns turns, read as recover
// reads them.
func waitJournals(t *testing.T, dir string, records, turns int) {
	t.Helper()
	var r, u int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, u = journalCounts(dir)
		if r >= records && u >= turns {
			return
		}
	}
	t.Fatalf("after 30 s the journals in %s hold %d records and %d turns, want %d and %d", dir, r, u, records, turns)
}

// journalCounts counts the record and turn frames of every journal in dir.
func journalCounts(dir string) (records, turns int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		br := bufio.NewReader(f)
		magic := trace.SniffJournal(br)
		if jr, err := trace.NewJournalReader(br, p, magic); err == nil {
			for {
				b, _, err := jr.Frame()
				if err != nil {
					break
				}
				switch b[0] {
				case 'R':
					records++
				case trace.FrameTurn:
					turns++
				}
			}
		}
		f.Close()
	}
	return records, turns
}
