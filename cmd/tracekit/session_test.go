package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// sessionRouter is a router in front of engines the way KV-cache-aware
// routers work: a request with a session key goes to the engine that key
// hashes to (rendezvous hashing, so the choice is stable), one without to
// the next engine in turn.
func sessionRouter(t *testing.T, header string, engines ...*mock.Server) *httptest.Server {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pick := int(next.Add(1) % uint64(len(engines)))
		if key := r.Header.Get(header); key != "" {
			best := uint64(0)
			for i := range engines {
				sum := sha256.Sum256([]byte(key + "@" + strconv.Itoa(i)))
				if s := binary.BigEndian.Uint64(sum[:]); s >= best {
					best, pick = s, i
				}
			}
		}
		// The request body is read whole first: an HTTP/1.x server may
		// close it once the handler writes its response, and a transport
		// still reading it then closes the upstream connection under the
		// answer being forwarded.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("router: reading the body of %s: %v", r.Header.Get("X-Request-Id"), err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// the forwarded request is the router's own, not tied to the
		// client connection's context
		out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, engines[pick].URL()+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("router: %v", err)
			return
		}
		out.Header = r.Header.Clone()
		out.ContentLength = r.ContentLength
		resp, err := client.Do(out)
		if err != nil {
			t.Errorf("router: %s: %v", r.Header.Get("X-Request-Id"), err)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				// a client that left takes the forwarded exchange down
				// with it: nothing is left to forward to
				if err != io.EOF && r.Context().Err() == nil {
					t.Errorf("router: the body of %s: %v", r.Header.Get("X-Request-Id"), err)
				}
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Two mocks behind a session-hashing router: with --session-header every
// turn of a conversation reaches the same mock (from the mocks' own
// logs), without it the conversations scatter over both.
func TestSessionHeaderKeepsConversationsOnOneEngine(t *testing.T) {
	a, b := mocktest.Start(t, nil), mocktest.Start(t, nil)
	router := sessionRouter(t, "X-Session-ID", a, b)
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "12", "--turns", "4", "--input-tokens", "10", "--output-tokens", "3",
		"--rate", "0", "--seed", "2", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	// engines returns, per conversation, the set of mocks that served it.
	engines := func(name string, extra ...string) map[string]map[int]bool {
		seenA, seenB := len(a.Log()), len(b.Log())
		out := filepath.Join(dir, name+".parquet")
		args := append([]string{"replay", tr, "--target", router.URL, "--model", "tracekit-mock", "--max-concurrency", "4",
			"--progress", "none", "--no-analyze", "-o", out}, extra...)
		if _, stderr, code := runCLI(t, args...); code != ExitOK {
			t.Fatalf("replay %v: exit %d: %s", extra, code, stderr)
		}
		conv := map[string]string{}
		for _, r := range readRecords(t, out) {
			if r.ErrorKind != "" {
				t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
			conv[r.RequestID] = r.ConversationID
		}
		got := map[string]map[int]bool{}
		for i, log := range [][]mock.LogEntry{a.Log()[seenA:], b.Log()[seenB:]} {
			for _, e := range log {
				c, ok := conv[e.RequestID]
				if !ok {
					continue // the run's probe
				}
				if got[c] == nil {
					got[c] = map[int]bool{}
				}
				got[c][i] = true
			}
		}
		if len(got) != 12 {
			t.Fatalf("%v: the mocks logged %d conversations, want 12", extra, len(got))
		}
		return got
	}
	used := map[int]bool{}
	for c, e := range engines("keyed", "--session-header", "X-Session-ID") {
		if len(e) != 1 {
			t.Errorf("with --session-header, conversation %s reached %d engines", c, len(e))
		}
		for i := range e {
			used[i] = true
		}
	}
	if len(used) != 2 {
		t.Errorf("with --session-header the conversations all hashed to one engine: %v", used)
	}
	split := 0
	for _, e := range engines("plain") {
		if len(e) > 1 {
			split++
		}
	}
	if split == 0 {
		t.Errorf("without --session-header no conversation reached both engines: the router does not scatter")
	}
}

// --session-field user puts the key in the body: "user" on chat, and
// metadata.user_id on Messages; --session-per-agent gives a sub-agent with
// a context of its own a key of its own, and keeps the session's key on
// the turns of its first context.
func TestSessionFieldAndPerAgent(t *testing.T) {
	srv := mocktest.Start(t, nil)
	dir := t.TempDir()
	for _, ep := range []string{"chat", "messages"} {
		tr := filepath.Join(dir, ep+".parquet")
		if _, stderr, code := runCLI(t, "synth", "--agent", "--endpoint", ep, "--conversations", "4", "--rounds", "2", "--fan-out", "1",
			"--sub-agents", "2", "--sub-agent-context", "own", "--seed", "4", "-o", tr); code != ExitOK {
			t.Fatalf("synth: exit %d: %s", code, stderr)
		}
		turns := readTurns(t, tr)
		fresh := map[string]bool{} // conversation/turn of each sub-agent that starts a fresh context
		for _, tu := range turns {
			if tu.Turn > 0 && len(tu.Parents) == 1 && tu.Parents[0] < 0 {
				fresh[tu.ConversationID+"/"+itoa(tu.Turn)] = true
			}
		}
		if len(fresh) == 0 {
			t.Fatalf("%s: the agent trace has no sub-agent with a context of its own", ep)
		}
		seen := len(srv.Log())
		out := filepath.Join(dir, ep+".rec.parquet")
		if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--mock-hints", "--session-field", "user", "--session-per-agent",
			"--progress", "none", "--no-analyze", "-o", out); code != ExitOK {
			t.Fatalf("replay: exit %d: %s", code, stderr)
		}
		conv := map[string]string{}
		for _, r := range readRecords(t, out) {
			if r.ErrorKind != "" {
				t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
			conv[r.RequestID] = r.ConversationID
		}
		keys := map[string]bool{}
		for _, e := range srv.Log()[seen:] {
			c, ok := conv[e.RequestID]
			if !ok {
				continue
			}
			var body struct {
				User     string `json:"user"`
				Metadata struct {
					UserID string `json:"user_id"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(e.Body, &body); err != nil {
				t.Fatal(err)
			}
			key := body.User
			if ep == "messages" {
				key = body.Metadata.UserID
			}
			if key != c && !(strings.HasPrefix(key, c+"/agent-") && fresh[c+"/"+strings.TrimPrefix(key, c+"/agent-")]) {
				t.Errorf("%s %s: session key %q, want %q or a fresh sub-agent's", ep, e.RequestID, key, c)
			}
			keys[key] = true
		}
		if len(keys) <= 4 {
			t.Errorf("%s: %d keys over 4 sessions with sub-agents: want the sub-agents keyed apart", ep, len(keys))
		}
	}
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }
