package mock

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	for in, want := range map[string]Fault{
		"status=429":       {Kind: FaultStatus, Status: 429},
		"reset":            {Kind: FaultReset},
		"disconnect=3":     {Kind: FaultDisconnect, After: 3},
		"stall=2s":         {Kind: FaultStall, After: 1, For: 2 * time.Second},
		"stall=150ms@4":    {Kind: FaultStall, After: 4, For: 150 * time.Millisecond},
		"malformed":        {Kind: FaultMalformed, After: 1},
		"malformed@0":      {Kind: FaultMalformed, After: 0},
		"nodone":           {Kind: FaultNoDone},
		"slowheaders=1.5s": {Kind: FaultSlowHeaders, For: 1500 * time.Millisecond},
		"noheaders":        {Kind: FaultNoHeaders},
		"gzip":             {Kind: FaultGzip},
		"json":             {Kind: FaultJSON},
		"closeafter":       {Kind: FaultCloseAfter},
		"idleclose=5s":     {Kind: FaultIdleClose, For: 5 * time.Second},
	} {
		got, err := ParseFault(in)
		if err != nil || got != want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseFault(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q via %q: %+v, %v", in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "status=404", "status", "reset=1", "disconnect", "disconnect=x", "stall", "stall=x", "stall=1s@-1", "malformed=3", "slowheaders=1s@2", "boom",
		"noheaders=1", "gzip@2", "json=x", "closeafter=1s", "idleclose", "idleclose=0s", "idleclose=x", "idleclose=1s@2"} {
		if _, err := ParseFault(bad); err == nil || !strings.Contains(err.Error(), FaultHeader) {
			t.Errorf("ParseFault(%q) error %v, want one naming the header", bad, err)
		}
	}
}

func faultRequest(t *testing.T, srv *Server, fault, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/chat/completions", strings.NewReader(
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"ignore_eos":true,"stream":true}`))
	req.Header.Set(FaultHeader, fault)
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if fault == "reset" {
			return nil
		}
		t.Fatalf("%s: %v", fault, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestForcedFaults(t *testing.T) {
	srv := startMock(t, nil)

	t.Run("status", func(t *testing.T) {
		for _, code := range []string{"429", "500", "503"} {
			resp := faultRequest(t, srv, "status="+code, "st-"+code)
			var body struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.Status[:3] != code || body.Error.Code != resp.StatusCode {
				t.Fatalf("status=%s: got %s, body %+v, %v", code, resp.Status, body, err)
			}
			if e := entryByID(t, srv, "st-"+code); e.Outcome != OutcomeFault || e.Fault != "status="+code || len(e.EventMonoNs) != 0 {
				t.Fatalf("entry %+v", e)
			}
		}
	})
	t.Run("reset", func(t *testing.T) {
		if resp := faultRequest(t, srv, "reset", "rst"); resp != nil {
			t.Fatalf("reset fault answered with %s", resp.Status)
		}
		if e := entryByID(t, srv, "rst"); e.Status != 0 || e.HeadersMonoNs != 0 || e.Fault != "reset" {
			t.Fatalf("entry %+v", e)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		resp := faultRequest(t, srv, "disconnect=3", "dis")
		events, done, err := sse(resp)
		if !errors.Is(err, io.ErrUnexpectedEOF) || done || len(events) != 3 {
			t.Fatalf("got %d events, done %v, err %v; want 3 events then unexpected EOF", len(events), done, err)
		}
		if e := entryByID(t, srv, "dis"); len(e.EventMonoNs) != 3 || e.Outcome != OutcomeFault {
			t.Fatalf("entry events %d outcome %s", len(e.EventMonoNs), e.Outcome)
		}
	})
	t.Run("stall", func(t *testing.T) {
		resp := faultRequest(t, srv, "stall=300ms@2", "stl")
		if _, done, err := sse(resp); err != nil || !done {
			t.Fatalf("stalled stream did not complete: %v", err)
		}
		e := entryByID(t, srv, "stl")
		// Due times are the stamps minus the lateness: event 2 is due the
		// stall plus one ITL after event 1, every other gap is one ITL.
		due := func(i int) int64 { return e.EventMonoNs[i] - e.EventLatenessNs[i] }
		itl := srv.cfg.Latency.DecodeBase.D()
		for i := 2; i < len(e.EventMonoNs); i++ {
			want := itl
			if i == 2 {
				want += 300 * time.Millisecond
			}
			if got := time.Duration(due(i) - due(i-1)); got != want {
				t.Fatalf("event %d due %v after event %d, want %v", i, got, i-1, want)
			}
		}
		if e.Outcome != OutcomeOK || e.Fault != "stall=300ms@2" {
			t.Fatalf("entry outcome %s fault %s", e.Outcome, e.Fault)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		resp := faultRequest(t, srv, "malformed@2", "mal")
		events, done, err := sse(resp)
		if err != nil || !done || len(events) != 8 {
			t.Fatalf("%d events, done %v, err %v; want 7 good + 1 bad", len(events), done, err)
		}
		var bad []int
		for i, ev := range events {
			if !json.Valid([]byte(ev)) {
				bad = append(bad, i)
			}
		}
		if len(bad) != 1 || bad[0] != 2 {
			t.Fatalf("invalid events at %v, want [2]", bad)
		}
		if e := entryByID(t, srv, "mal"); len(e.EventMonoNs) != 7 || e.Outcome != OutcomeFault {
			t.Fatalf("entry events %d outcome %s", len(e.EventMonoNs), e.Outcome)
		}
	})
	t.Run("nodone", func(t *testing.T) {
		resp := faultRequest(t, srv, "nodone", "nd")
		events, done, err := sse(resp)
		if err != nil || done || len(events) != 7 {
			t.Fatalf("%d events, done %v, err %v; want 7 events, clean end, no [DONE]", len(events), done, err)
		}
	})
	t.Run("slowheaders", func(t *testing.T) {
		start := time.Now()
		resp := faultRequest(t, srv, "slowheaders=300ms", "slow")
		if d := time.Since(start); d < 300*time.Millisecond || resp.StatusCode != 200 {
			t.Fatalf("headers after %v with status %d, want >= 300ms", d, resp.StatusCode)
		}
		sse(resp)
		if e := entryByID(t, srv, "slow"); time.Duration(e.HeadersMonoNs-e.ArrivalMonoNs) < 300*time.Millisecond {
			t.Fatalf("log headers after %v", time.Duration(e.HeadersMonoNs-e.ArrivalMonoNs))
		}
	})
}

func TestDrawnFaults(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Faults.Status503 = 1 })
	for range 3 {
		resp := post(t, srv, "/v1/chat/completions", chatBody(2, true, "user", "x"), nil)
		if resp.StatusCode != 503 {
			t.Fatalf("status %d with status_503 probability 1", resp.StatusCode)
		}
	}
	srv = startMock(t, func(c *Config) { c.Faults.Disconnect, c.Faults.NoDone = 0.5, 0.5 })
	kinds := map[string]int{}
	for i := range 20 { // fixed ids: the draws are deterministic
		resp := post(t, srv, "/v1/chat/completions", chatBody(4, true, "user", "x"), map[string]string{"X-Request-Id": fmt.Sprint("df", i)})
		sse(resp)
	}
	for _, e := range srv.Log() {
		kinds[strings.SplitN(e.Fault, "=", 2)[0]]++
	}
	if kinds["disconnect"] == 0 || kinds["nodone"] == 0 || kinds["disconnect"]+kinds["nodone"] != 20 {
		t.Fatalf("drawn faults %v over 20 requests", kinds)
	}
}

// TestNoHeadersFault: the request is read, then not one byte comes back,
// until the client goes away (outcome fault) or the server closes
// (canceled), either way with no status and no headers in the log.
func TestNoHeadersFault(t *testing.T) {
	srv := startMock(t, nil)
	c := dialRaw(t, srv)
	c.send("quiet", "noheaders", true)
	waitFor(t, "the fault to be drawn", func() bool { return srv.m.faults.Load() == 1 })
	c.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want nothing", n, err)
	}
	c.conn.Close()
	var e LogEntry
	waitFor(t, "the entry of the abandoned request", func() bool {
		for _, x := range srv.Log() {
			if x.RequestID == "quiet" {
				e = x
				return true
			}
		}
		return false
	})
	if e.Fault != "noheaders" || e.Outcome != OutcomeFault || e.Status != 0 || e.HeadersMonoNs != 0 || e.AdmitMonoNs != 0 {
		t.Fatalf("entry %+v", e)
	}

	c = dialRaw(t, srv)
	c.send("held", "noheaders", false)
	waitFor(t, "the second fault", func() bool { return srv.m.faults.Load() == 2 })
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.readEnd(); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("server close: %d bytes, %v; want no byte, then EOF", n, err)
	}
	if e := entryByID(t, srv, "held"); e.Outcome != OutcomeCanceled || e.Status != 0 {
		t.Fatalf("entry %+v", e)
	}
}

// readChunks reads an HTTP/1.1 chunked body into its chunks, as framed.
func readChunks(t *testing.T, br *bufio.Reader) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("chunk size line: %v", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil || string(b[n:]) != "\r\n" {
			t.Fatalf("chunk of %d bytes: %v", n, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, b[:n])
	}
}

// inflatePrefix decompresses as much of a gzip stream prefix as it can.
func inflatePrefix(b []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	out, _ := io.ReadAll(zr) // a prefix ends in io.ErrUnexpectedEOF
	return string(out)
}

// TestGzipFault: a stream compressed although the client asked for
// identity, and still a stream: every HTTP chunk but the trailer's ends in
// a sync flush, so what has arrived always inflates to whole events.
func TestGzipFault(t *testing.T) {
	srv := startMock(t, nil)
	c := dialRaw(t, srv)
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"ignore_eos":true,"stream":true}`
	fmt.Fprintf(c.conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: mock\r\nAccept-Encoding: identity\r\nX-Request-Id: gz\r\n%s: gzip\r\nContent-Length: %d\r\n\r\n%s", FaultHeader, len(body), body)
	tp := textproto.NewReader(c.br)
	status, err := tp.ReadLine()
	if err != nil || status != "HTTP/1.1 200 OK" {
		t.Fatalf("status %q, %v", status, err)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil || h.Get("Content-Encoding") != "gzip" || h.Get("Transfer-Encoding") != "chunked" || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("headers %v, %v", h, err)
	}
	chunks := readChunks(t, c.br)
	e := entryByID(t, srv, "gz")
	if e.Fault != "gzip" || e.Outcome != OutcomeFault || len(e.EventMonoNs) != 6 {
		t.Fatalf("entry fault %q outcome %s events %d", e.Fault, e.Outcome, len(e.EventMonoNs))
	}
	if len(chunks) != len(e.EventMonoNs)+2 { // the events, [DONE], the gzip trailer
		t.Fatalf("%d chunks for %d events", len(chunks), len(e.EventMonoNs))
	}
	var sofar []byte
	for i, ch := range chunks[:len(chunks)-1] {
		if !bytes.HasSuffix(ch, []byte{0, 0, 0xff, 0xff}) {
			t.Fatalf("chunk %d does not end in a sync flush: % x", i, ch)
		}
		sofar = append(sofar, ch...)
		text := inflatePrefix(sofar)
		if !strings.HasSuffix(text, "\n\n") || strings.Count(text, "data: ") != i+1 {
			t.Fatalf("after chunk %d the stream inflates to %q, want %d whole events", i, text, i+1)
		}
	}
	sofar = append(sofar, chunks[len(chunks)-1]...)
	zr, err := gzip.NewReader(bytes.NewReader(sofar))
	if err != nil {
		t.Fatal(err)
	}
	events, done, err := sse(&http.Response{Body: io.NopCloser(zr)})
	if err != nil || !done || len(events) != 6 {
		t.Fatalf("inflated stream: %d events, done %v, %v", len(events), done, err)
	}
	parseChunks(t, events)

	// Not streaming: one compressed body of the declared length.
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	req.Header.Set(FaultHeader, "gzip")
	req.Header.Set("Accept-Encoding", "identity")
	uresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer uresp.Body.Close()
	raw, _ := io.ReadAll(uresp.Body)
	if uresp.Header.Get("Content-Encoding") != "gzip" || uresp.ContentLength != int64(len(raw)) {
		t.Fatalf("unary: encoding %q, length %d of %d", uresp.Header.Get("Content-Encoding"), uresp.ContentLength, len(raw))
	}
	if text := inflatePrefix(raw); !json.Valid([]byte(text)) || !strings.Contains(text, `"text_completion"`) {
		t.Fatalf("unary body inflates to %q", text)
	}
}

// TestJSONFault: a stream=true request answered with a plain completion.
func TestJSONFault(t *testing.T) {
	srv := startMock(t, nil)
	resp := faultRequest(t, srv, "json", "js")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || len(got.Choices) != 1 || len(strings.Fields(got.Choices[0].Message.Content)) != 6 || got.Usage.CompletionTokens != 6 {
		t.Fatalf("body %+v", got)
	}
	if e := entryByID(t, srv, "js"); e.Fault != "json" || e.Outcome != OutcomeFault || !e.Stream || len(e.EventMonoNs) != 0 {
		t.Fatalf("entry %+v", e)
	}
}

// TestDrawnNewFaults draws the new kinds by probability.
func TestDrawnNewFaults(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Faults.Gzip, c.Faults.JSON = 0.5, 0.5 })
	for i := range 16 {
		resp := post(t, srv, "/v1/chat/completions", chatBody(3, true, "user", "x"), map[string]string{"X-Request-Id": fmt.Sprint("d", i)})
		io.Copy(io.Discard, resp.Body)
	}
	kinds := map[string]int{}
	for _, e := range srv.Log() {
		kinds[e.Fault]++
	}
	if kinds["gzip"] == 0 || kinds["json"] == 0 || kinds["gzip"]+kinds["json"] != 16 {
		t.Fatalf("drawn faults %v over 16 requests", kinds)
	}
	srv = startMock(t, func(c *Config) { c.Faults.NoHeaders = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
	go func() {
		for srv.m.faults.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("drawn noheaders: %v, want the client's own cancel", err)
	}
	waitFor(t, "the noheaders entry", func() bool { return len(srv.Log()) == 1 })
	if e := srv.Log()[0]; e.Fault != "noheaders" || e.Status != 0 {
		t.Fatalf("entry %+v", e)
	}
}

// TestStallSameOnBothPaths: a stall delays what comes after event N by its
// duration and leaves a complete response (outcome ok) on a stream and on
// a non-streaming body alike; past the last event it does nothing.
func TestStallSameOnBothPaths(t *testing.T) {
	srv := startMock(t, nil)
	const stall = 300 * time.Millisecond
	for _, stream := range []bool{true, false} {
		c := dialRaw(t, srv)
		id := fmt.Sprint("stall-", stream)
		c.send(id, "stall=300ms@2", stream)
		if resp, _, err := c.response(); err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %v: %v", stream, err)
		}
		e := entryByID(t, srv, id)
		if e.Outcome != OutcomeOK {
			t.Fatalf("stream %v: outcome %s, want ok", stream, e.Outcome)
		}
		// Generation alone (prefill + 2 ITLs for 3 tokens) is far below
		// the stall; sleeps are never early, so this is a lower bound.
		gen := srv.cfg.Latency.prefill(int(e.PromptTokens)) + 2*srv.cfg.Latency.DecodeBase.D()
		if took := time.Duration(e.DoneMonoNs - e.AdmitMonoNs); took < gen+stall {
			t.Fatalf("stream %v: done %v after admission, want at least generation %v + stall %v", stream, took, gen, stall)
		}
		// A stall past the last event (3 tokens: 4 events with chat's
		// role chunk) does nothing; if it did, the hang guard would trip.
		id = fmt.Sprint("late-stall-", stream)
		c.send(id, "stall=1h@99", stream)
		if resp, _, err := c.response(); err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %v, stall past the end: %v", stream, err)
		}
		if e := entryByID(t, srv, id); e.Outcome != OutcomeOK {
			t.Fatalf("stream %v, stall past the end: outcome %s", stream, e.Outcome)
		}
	}
}

// TestFaultOutcomeTable pins what each fault does on each path.
func TestFaultOutcomeTable(t *testing.T) {
	for _, tc := range []struct {
		fault         string
		stream, unary bool // broken on a stream, on a unary body
		streamAsUnary bool
	}{
		{"stall=1s@2", false, false, false},
		{"slowheaders=1s", false, false, false},
		{"closeafter", false, false, false},
		{"idleclose=1s", false, false, false},
		{"malformed@2", true, true, false},
		{"malformed@9", false, false, false}, // past the 5 events
		{"disconnect=2", true, true, false},
		{"nodone", true, false, false},
		{"json", true, false, true},
		{"gzip", true, true, false},
		{"status=503", true, true, false},
		{"reset", true, true, false},
		{"noheaders", true, true, false},
	} {
		f, err := ParseFault(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		s, u := f.outcome(true, 5), f.outcome(false, 5)
		if s.broken != tc.stream || u.broken != tc.unary || s.unary != tc.streamAsUnary || u.unary {
			t.Errorf("%s: broken stream %v unary %v, stream answered unary %v; want %v %v %v", tc.fault, s.broken, u.broken, s.unary, tc.stream, tc.unary, tc.streamAsUnary)
		}
		if s.stallAt != u.stallAt || s.stallFor != u.stallFor || s.malformedAt != u.malformedAt || s.disconnectAt != u.disconnectAt {
			t.Errorf("%s: positions differ between the paths: %+v vs %+v", tc.fault, s, u)
		}
	}
}
