package calibrate

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// TestEveryEndpointJoinsEveryEvent runs a small ladder once per API
// against a child mock and checks the join of each: every event (or body)
// of either side found its partner, as many as the step sent, and, from
// the files, event i of the recording is event i of the mock's log for
// every request: the same count, the same tokens, and causality (the
// client cannot have read event i before the mock finished writing event
// i-1 and waited an ITL; a join shifted by one index breaks it for the
// early side, and the counts for the other).
func TestEveryEndpointJoinsEveryEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	cfg := Config{
		Streams: []int{3}, EventsPerS: []float64{60}, Duration: 300 * time.Millisecond, MaxError: time.Second,
		Endpoints: trace.Endpoints,
		Mode:      ModeProcess, MockCommand: []string{os.Args[0]}, MockEnv: []string{childEnv + "=1"},
		Dir: t.TempDir(), Logf: t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Steps {
		names = append(names, r.Name)
	}
	var want []string
	for _, base := range []string{"probe", "streams=3"} {
		for _, e := range trace.Endpoints {
			want = append(want, base+"@"+e)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("steps %v, want %v", names, want)
	}
	if len(rep.OffsetsNs) != len(trace.Endpoints) {
		t.Errorf("offsets %v: want one per endpoint", rep.OffsetsNs)
	}
	for i, r := range rep.Steps {
		p := size(r.Step, cfg.Duration, r.Step.ITL(), i)
		streamed := trace.Generates(r.Step.Endpoint)
		per := 1 // a body
		if streamed {
			per = p.maxTokens // one event per token
			if r.Step.Endpoint == trace.EndpointChat {
				per++ // and chat's role chunk
			}
		}
		n := p.requests * per
		if r.Endpoint != r.Step.Endpoint || (r.Join == JoinEvents) != streamed {
			t.Errorf("%s: endpoint %q, join %q", r.Name, r.Endpoint, r.Join)
		}
		if r.Matched != n || r.EventsClient != n || r.EventsServer != n || r.Unmatched != 0 || r.RequestsUnmatched != 0 || r.Errors != 0 || r.TokenMismatches != 0 {
			t.Errorf("%s: matched %d, client %d, server %d of %d, %d unmatched, %d requests unmatched, %d errors, %d token mismatches",
				r.Name, r.Matched, r.EventsClient, r.EventsServer, n, r.Unmatched, r.RequestsUnmatched, r.Errors, r.TokenMismatches)
		}
		if off := rep.OffsetsNs[r.Step.Endpoint]; r.ErrP50Ns != r.RawMedianNs-off {
			t.Errorf("%s: error p50 %d, raw median %d, its endpoint's offset %d", r.Name, r.ErrP50Ns, r.RawMedianNs, off)
		}
		checkEventByEvent(t, r, p)
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"offset removed per endpoint", "endpoint", "streams=3@messages", "responses", "body"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, out.String())
		}
	}
}

// checkEventByEvent reads a step's recording and the child mock's log and
// compares them request by request.
func checkEventByEvent(t *testing.T, r Result, p plan) {
	t.Helper()
	recs, meta, err := readRecording(r.Recording)
	if err != nil {
		t.Fatal(err)
	}
	log, _, err := mock.ReadLog(strings.TrimSuffix(r.Recording, ".recording.parquet") + ".mock.parquet")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]mock.LogEntry{}
	for _, e := range log {
		byID[e.RequestID] = e
	}
	for _, rec := range recs {
		e, ok := byID[rec.RequestID]
		if !ok || e.Endpoint != r.Endpoint || rec.Endpoint != r.Endpoint {
			t.Fatalf("%s: request %s on %q, logged %v on %q", r.Name, rec.RequestID, rec.Endpoint, ok, e.Endpoint)
		}
		if !e.Stream {
			// One body: the client's stamp of its end comes after the
			// mock began writing it.
			if !rec.NonStreaming || len(rec.EventNs) != 1 || meta.StartMonoNs+rec.EventNs[0] < e.HeadersMonoNs {
				t.Errorf("%s: request %s: non-streaming %v, %d events, body stamp %d before the mock's write %d",
					r.Name, rec.RequestID, rec.NonStreaming, len(rec.EventNs), meta.StartMonoNs+rec.EventNs[0], e.HeadersMonoNs)
			}
			continue
		}
		if len(rec.EventNs) != len(e.EventMonoNs) {
			t.Errorf("%s: request %s: %d client events, %d logged", r.Name, rec.RequestID, len(rec.EventNs), len(e.EventMonoNs))
			continue
		}
		var tokens int32
		for k := range rec.EventNs {
			tokens += e.EventTokens[k]
			if rec.TokensExact && rec.EventTokens[k] != e.EventTokens[k] {
				t.Errorf("%s: request %s event %d: %d tokens, logged %d", r.Name, rec.RequestID, k, rec.EventTokens[k], e.EventTokens[k])
			}
			if k > 0 && meta.StartMonoNs+rec.EventNs[k] <= e.EventMonoNs[k-1] {
				t.Errorf("%s: request %s: event %d stamped %d, before the mock finished writing event %d at %d",
					r.Name, rec.RequestID, k, meta.StartMonoNs+rec.EventNs[k], k-1, e.EventMonoNs[k-1])
			}
		}
		if tokens != int32(p.maxTokens) {
			t.Errorf("%s: request %s: logged events carry %d tokens, want %d (%+v)", r.Name, rec.RequestID, tokens, p.maxTokens, e)
		}
	}
}
