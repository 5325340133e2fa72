package replay

import (
	"github.com/tracekit/tracekit/internal/mock/mocktest"

	"strings"
	"testing"
	"time"
)

// A turn the trace marks non-streaming is sent with "stream": false and
// recorded as one event at the instant its body was completely read,
// carrying the completion tokens (exact, from usage); the mock's log has
// the same request, answered unary.
func TestNonStreamingTurns(t *testing.T) {
	srv := mocktest.Start(t, nil)
	c := conv("u", 3, 0, 10*time.Millisecond, 5)
	c[1].NonStreaming = true
	sink, res := run(t, Config{Trace: writeTrace(t, c), Targets: []string{srv.URL()}, IgnoreEOS: true})
	if res.Errors != 0 || res.Sent != 3 {
		t.Fatalf("result %+v", res)
	}
	recs := sink.byID()
	u1 := recs["u-1-0"]
	if !u1.NonStreaming || len(u1.EventNs) != 1 || len(u1.EventTokens) != 1 || u1.EventTokens[0] != 5 || !u1.TokensExact ||
		u1.CompletionTokens != 5 || u1.EventNs[0] < u1.HeadersNs || u1.EventNs[0] > u1.DoneNs {
		t.Errorf("non-streaming record %+v", u1)
	}
	for _, id := range []string{"u-0-0", "u-2-0"} {
		if r := recs[id]; r.NonStreaming || len(r.EventNs) != 6 {
			t.Errorf("%s: non-streaming %v, %d events; want a stream of 6", id, r.NonStreaming, len(r.EventNs))
		}
	}
	bodies := map[string]string{}
	for _, e := range srv.Log() {
		bodies[e.RequestID] = string(e.Body)
	}
	if b := bodies["u-1-0"]; !strings.Contains(b, `"stream":false`) || strings.Contains(b, "stream_options") {
		t.Errorf("the non-streaming request's body: %s", b)
	}
	if b := bodies["u-2-0"]; !strings.Contains(b, `"stream":true`) {
		t.Errorf("the next streaming request's body: %s", b)
	}
	// Its answer is carried into turn 2's history.
	if b := bodies["u-2-0"]; strings.Count(b, `"role":"assistant"`) != 2 {
		t.Errorf("turn 2 does not carry both answers: %s", b)
	}
}
