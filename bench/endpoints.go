package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/trace"
)

// decoderAPIs are the streaming APIs BenchmarkDecoders measures, chat
// first: the others are held to chat's speed.
var decoderAPIs = []string{"chat", "responses", "messages"}

// maxDecoderRatio is how much slower than chat's an API's decoder may be
// on the same machine, in the same run.
const maxDecoderRatio = 1.5

// decoderFigures turns record's BenchmarkDecoders rows into figures: per
// API (its fastest row, with -count) its token events/s and allocations
// (goal 0 per event), and for
// Responses and Messages the ratio of chat's token events/s to theirs
// (goal <= 1.5x). Token events (outputs/s) are the events a recording
// lists; events/s counts every SSE event, Responses' and Messages'
// opening and closing ones too.
func decoderFigures(sec string, rows []benchRow, cmd string) []figure {
	var figs []figure
	var chat float64
	for _, name := range decoderAPIs {
		r, ok := best(rows, "BenchmarkDecoders/"+name, "outputs/s")
		if !ok {
			continue
		}
		out, allocs := r.Metrics["outputs/s"], r.Metrics["allocs/op"]
		figs = append(figs, figure{Section: sec, Name: name + " stream decoding",
			Value: fmt.Sprintf("%s token events (%s SSE events, %.0f MB/s), %.0f allocs/op", perS(out), perS(r.Metrics["events/s"]), r.Metrics["MB/s"], allocs),
			Goal:  "0 allocs per event", Verdict: atMost(allocs, 0, num), Command: cmd,
			Note: "record.Stream with the " + name + " decoder over a 256-token stream in 1.5 KB reads (chat: vLLM's shape; Responses and Messages: the mock's encoders); allocs/op is per whole stream"})
		if name == "chat" {
			chat = out
			continue
		}
		if chat > 0 && out > 0 {
			ratio := chat / out
			figs = append(figs, figure{Section: sec, Name: name + " decoding against chat's",
				Value: fmt.Sprintf("%.2fx chat's time per token event (chat %s, %s %s token events)", ratio, perS(chat), name, perS(out)),
				Goal:  fmt.Sprintf("<= %gx chat's, same machine and run", maxDecoderRatio), Verdict: atMost(ratio, maxDecoderRatio, func(v float64) string { return fmt.Sprintf("%.2fx", v) }),
				Command: cmd})
		}
	}
	return figs
}

// best is the row named name with the largest metric, among repeated runs
// (-count).
func best(rows []benchRow, name, metric string) (benchRow, bool) {
	var out benchRow
	ok := false
	for _, r := range rows {
		if r.Name == name && (!ok || r.Metrics[metric] > out.Metrics[metric]) {
			out, ok = r, true
		}
	}
	return out, ok
}

// calibrateEndpointsBench runs `tracekit calibrate --endpoint` over every
// API at 200 streams: per endpoint, how closely the client's stamps agree
// with the mock's ground truth, each against its own probe's offset.
func calibrateEndpointsBench(ctx context.Context, e *env) ([]figure, error) {
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "calibrate-endpoints"), "--streams", "200", "--duration", "3s",
		"--endpoint", strings.Join(trace.Endpoints, ","))
	if err != nil {
		return nil, err
	}
	return endpointFigures(rep, cmd), nil
}

// endpointFigures is one figure per endpoint's stream step of rep.
func endpointFigures(rep *calibrate.Report, cmd string) []figure {
	const sec = "Fidelity per endpoint (tracekit calibrate --endpoint, mock in a child process)"
	var figs []figure
	for _, r := range rep.Steps {
		if r.Step.Kind != calibrate.KindStreams {
			continue
		}
		what, note := "events joined by index", ""
		if r.Join == calibrate.JoinBody {
			what = "one body per request: body-complete stamp against the mock's write"
			note = "the mock stamps a body just before writing it (its log entry is recorded before the answer goes out), so its own writing of the body, several segments for an embeddings answer, is in the error; the event joins are stamped after each write"
		}
		verdict := "met"
		if !r.Pass {
			verdict = "**missed**: " + r.Why
		}
		figs = append(figs, figure{Section: sec, Name: fmt.Sprintf("%s at %d streams (%s)", r.Endpoint, r.Step.Streams, what),
			Value: fmt.Sprintf("error p50 %.3f ms, p99 %.3f ms, max %.3f ms (offset %.1f us removed); %d/%d matched, %d unmatched, %d token mismatches, %d failed requests",
				float64(r.ErrP50Ns)/1e6, float64(r.ErrP99Ns)/1e6, float64(r.ErrMaxNs)/1e6, float64(rep.OffsetsNs[r.Step.Endpoint])/1e3,
				r.Matched, r.EventsClient, r.Unmatched, r.TokenMismatches, r.Errors),
			Goal: "every event matched, p99 <= 1 ms", Verdict: verdict, Command: cmd, Note: note})
	}
	return figs
}
