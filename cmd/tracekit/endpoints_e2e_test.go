package main

import (
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// Every endpoint end to end from the command line: synth writes a trace
// for it, replay sends it to the mock (which streams a reasoning phase
// before every generating answer but a transcript), and analyze reports
// it with no error.
// Each record names its API, the generating APIs' first answer event
// comes after the reasoning ones, and the others count their items.
func TestEveryEndpointEndToEnd(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.ReasoningMean, c.Latency.ReasoningCV = 4, 0 })
	for _, ep := range trace.Endpoints {
		t.Run(ep, func(t *testing.T) {
			dir := t.TempDir()
			tr, rec := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet")
			args := []string{"synth", "--endpoint", ep, "--conversations", "4", "--rate", "0", "--seed", "1", "-o", tr}
			switch ep {
			case trace.EndpointEmbeddings:
				args = append(args, "--batch-size", "3", "--input-tokens", "20")
			case trace.EndpointRerank, trace.EndpointScore:
				args = append(args, "--documents", "4", "--query-tokens", "8", "--document-tokens", "16")
			case trace.EndpointTranscriptions, trace.EndpointTranslations:
				args = append(args, "--turns", "2", "--input-tokens", "8", "--output-tokens", "12", "--audio-seconds", "1-2")
			default:
				args = append(args, "--turns", "2", "--input-tokens", "40", "--output-tokens", "12")
			}
			if _, stderr, code := runCLI(t, args...); code != ExitOK {
				t.Fatalf("synth: exit %d: %s", code, stderr)
			}
			if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none"); code != ExitOK {
				t.Fatalf("replay: exit %d: %s", code, stderr)
			}
			recs, _, err := trace.ReadRecords(rec)
			if err != nil || len(recs) == 0 {
				t.Fatalf("%d records, %v", len(recs), err)
			}
			for _, r := range recs {
				if r.ErrorKind != "" || r.Endpoint != ep {
					t.Fatalf("%s turn %d: endpoint %q, error %s %q", r.ConversationID, r.Turn, r.Endpoint, r.ErrorKind, r.ErrorMessage)
				}
				if trace.Generates(ep) {
					if len(r.EventNs) == 0 || r.CompletionTokens <= 0 {
						t.Errorf("%s turn %d: %d events, %d completion tokens", r.ConversationID, r.Turn, len(r.EventNs), r.CompletionTokens)
					}
					if speech(ep) && r.FirstAnswerEvent != 0 {
						t.Errorf("%s turn %d: first answer event %d: a transcript has no reasoning", r.ConversationID, r.Turn, r.FirstAnswerEvent)
					}
					if ep != trace.EndpointCompletions && !speech(ep) && (r.FirstAnswerEvent <= 0 || int(r.FirstAnswerEvent) >= len(r.EventNs)) {
						t.Errorf("%s turn %d: first answer event %d of %d: want after the reasoning events", r.ConversationID, r.Turn, r.FirstAnswerEvent, len(r.EventNs))
					}
				} else if r.Items <= 0 {
					t.Errorf("%s: %d items", r.ConversationID, r.Items)
				}
			}
			var out struct {
				Tracekit struct {
					Endpoints map[string]struct {
						Completed, Failed int
					} `json:"endpoints"`
				} `json:"tracekit"`
			}
			analyzeJSON(t, rec, &out)
			if e := out.Tracekit.Endpoints[ep]; e.Completed != len(recs) || e.Failed != 0 {
				t.Errorf("analyze's %s section: %+v, want %d completed and none failed (all: %+v)", ep, e, len(recs), out.Tracekit.Endpoints)
			}
		})
	}
}

func speech(ep string) bool {
	return ep == trace.EndpointTranscriptions || ep == trace.EndpointTranslations
}
