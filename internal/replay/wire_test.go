package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire_bodies.golden from this build")

// wireConv is a chat of n turns whose messages exercise every escape the
// body encoder knows (quotes, backslashes, control characters, non-ASCII,
// invalid UTF-8), redacted messages (filler), a per-turn model and tools,
// and a tool-call round trip in the middle.
func wireConv(id string, n int) []trace.Turn {
	turns := make([]trace.Turn, n)
	for k := range turns {
		msgs := []trace.Message{{Role: "user", Content: fmt.Sprintf("q%d of %s: \"quoted\" \\ tab\t nl\n cr\r ctl\x01 é 漢 \xff end", k, id), Tokens: 12}}
		switch {
		case k == 0:
			msgs = append([]trace.Message{{Role: "system", Content: "You are terse.", Tokens: 4}}, msgs...)
		case k%7 == 3:
			msgs = append(msgs, trace.Message{Role: "user", Tokens: 9}) // redacted: filler text
		}
		turns[k] = trace.Turn{
			ConversationID: id, Turn: int32(k),
			ArrivalOffsetNs: int64(k) * int64(time.Millisecond),
			Messages:        msgs,
			ReferenceAnswer: fmt.Sprintf("reference answer %d of %s with \"quotes\"\n", k, id),
			OutputTokens:    3,
		}
		if k == 5 {
			turns[k].Model = "other-model"
		}
		if k == 8 {
			turns[k].Tools, turns[k].ToolChoice = searchTool, `"required"`
			turns[k].ReferenceToolCalls = []trace.ToolCall{{ID: "call_w8", Name: "search", Arguments: `{"q":"a\"b"}`}}
		}
		if k == 9 {
			turns[k].Messages = []trace.Message{{Role: "tool", Content: "found \"it\"", ToolCallID: "call_w8", Tokens: 3}}
		}
	}
	return turns
}

// wireGraph is a fan-out of three with a join, a RootParent node, a node
// joining both, and a chain of twelve after it.
func wireGraph(id string) []trace.Turn {
	g := []trace.Turn{gturn(id, 0, nil, 0,
		trace.Message{Role: "system", Content: "You are an agent.", Tokens: 4},
		trace.Message{Role: "user", Content: "find \"three\" things", Tokens: 3})}
	for k := int32(1); k <= 3; k++ {
		g = append(g, gturn(id, k, []int32{0}, 0))
	}
	g = append(g, gturn(id, 4, []int32{3, 1, 2}, 0), gturn(id, 5, []int32{trace.RootParent}, 0), gturn(id, 6, []int32{4, 5}, 0))
	// A chain after the join: each node its parent's only child.
	for k := int32(7); k < 19; k++ {
		g = append(g, gturn(id, k, []int32{k - 1}, 0))
	}
	for k := range g {
		g[k].ArrivalOffsetNs = int64(k) * int64(time.Millisecond)
		g[k].ReferenceAnswer = fmt.Sprintf("graph ref %d", k)
	}
	return g
}

// wireScenarios are the runs whose request bodies must stay byte for
// byte what they were before bodies were built from pre-encoded history.
func wireScenarios(url string, trace string) map[string]Config {
	temp := 0.5
	base := func() Config {
		return Config{Trace: trace, Targets: []string{url}, IgnoreEOS: true, Seed: 7, MaxConcurrency: 16}
	}
	chat := base()
	ref := base()
	ref.History = HistoryReference
	open := base()
	open.Timing = TimingTrace
	open.Temperature, open.ExtraBody, open.ContinuousUsage = &temp, `{"top_p":0.9}`, "on"
	comp := base()
	comp.Endpoint = EndpointCompletions
	compOpen := comp
	compOpen.Timing = TimingTrace
	return map[string]Config{"chat": chat, "reference": ref, "open": open, "completions": comp, "completions-open": compOpen}
}

// The request bodies of chats (server and reference history), open loop,
// the completions endpoint and graphs with a join, replayed against the
// mock, hashed per request and compared with the hashes the body encoder
// of before pre-encoded history produced (testdata/wire_bodies.golden;
// -update-wire rewrites it).
func TestWireBodiesUnchanged(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond) })
	path := writeTrace(t, wireConv("c1", 34), wireConv("c2", 31), wireGraph("g1"))
	var lines []string
	names := []string{"chat", "completions", "completions-open", "open", "reference"}
	scen := wireScenarios(srv.URL(), path)
	seen := 0
	for _, name := range names {
		sink, _ := run(t, scen[name])
		for _, r := range sink.Records() {
			if r.ErrorKind != "" {
				t.Fatalf("%s %s: %s %s", name, r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
		}
		ids := sink.byID()
		log := srv.Log()
		for _, e := range log[seen:] {
			if _, traffic := ids[e.RequestID]; !traffic || e.Body == nil {
				continue // the probe
			}
			h := sha256.Sum256(e.Body)
			lines = append(lines, fmt.Sprintf("%s %s %d %s", name, e.RequestID, len(e.Body), hex.EncodeToString(h[:8])))
		}
		seen = len(log)
	}
	slices.Sort(lines)
	got := []byte(strings.Join(lines, "\n") + "\n")
	golden := filepath.Join("testdata", "wire_bodies.golden")
	if *updateWire {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d: got %q, want %q (%d lines, want %d)", i+1, gl[i], wl[i], len(gl), len(wl))
			}
		}
		t.Fatalf("%d body lines, want %d", len(gl), len(wl))
	}
	if len(lines) < 5*(34+31+19) {
		t.Fatalf("only %d bodies captured", len(lines))
	}
}
