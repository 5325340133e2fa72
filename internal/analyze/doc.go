// Package analyze turns recordings into serving metrics, offline.
//
// Data flow: Files opens one or more recordings (shards of one run are
// aligned on RunMeta.StartWallNs), reads them through trace's column
// scanner (trace.OpenScanner: only the columns the metrics need, one row
// group at a time into reused buffers, the next decoding while the
// accumulator reads the current; analyze knows nothing of the Parquet
// layout), aligns each record (trace.Record.Shift), streams the rows once
// through an accumulator that derives each request's metrics (Derive) and
// feeds the distributions, bins and per-request table, then finish freezes
// everything into one Summary (the per-event statistics, the decode-only
// ITL's and the steady window on their own goroutines, each a few linear
// passes over the samples: see summarize). Text (WriteText), JSON (WriteJSON), the per-request file
// (WritePerRequest) and the HTML report (WriteHTML) are renderers of that one
// Summary, so they never disagree; Compare diffs two Summaries, and a
// gate (ParseGate, EvaluateGate) turns the diff into a CI verdict.
//
// Files by concern: read.go (opening, validating, aligning), shards.go
// (directories, one run's shards, their clocks), accumulate.go
// (the single pass), summary.go (Summary and finish), throughput.go
// (goodput, peak output and concurrency), stats.go and selectk.go
// (distributions), series.go (1 s bins), turns.go (per turn and cached
// tokens), multiturn.go (vLLM multi-turn's table), session.go (session
// metrics of graph conversations, from the records' parents), endpoints.go
// (each API's figures: TTFO and reasoning for the generating ones, items
// for embeddings, rerank and score), figures.go (the per-request
// figures beside vLLM's block: time to second token, TTFO, reasoning,
// decode-only ITL, per-user rates), errorkinds.go,
// health.go (client health), media.go (what requests with media sent,
// their send time, media tokens from usage, TTFT by media), then the renderers text.go, json.go, html.go,
// perrequest.go and compare.go, and gate.go (compare --fail-on). runs.go
// aggregates a run set (replay --num-runs, analyze --runs): Summaries in,
// per metric the mean across runs, sample std and Student's t interval
// out; runs_gate.go compares two sets and gates on their means.
//
// Definitions are vLLM `bench serve`'s by default (see Derive and Summary):
// success is vLLM's client's (HTTP 200, an event, no transport error: a
// stream that ended cleanly without [DONE] counts; Options.Success), TTFT
// = first event - start (sent_ns, or slot_ns for vLLM's st:
// Options.Start), ITL = successive event gaps pooled over successful
// requests (Options.ITL names the other tools' definitions), E2EL = last
// event - start, TPOT = (E2EL - TTFT) / (output_len - 1), statistics with
// numpy's linear percentile. The multi-turn table uses vLLM multi-turn's
// client's definitions instead (multiturn.go).
//
// Memory: exact percentiles need every sample, 8 bytes per request for each
// per-request distribution and 8 bytes per token event for each per-event
// one: the per-event ITL and the event times for the peak-throughput bins,
// 16 bytes per event, sized up front from the files' footers. The
// per-token ITL shares the per-event samples while every event carries one
// token (else another 8), and the decode-only ITL views them as one span
// per stream (Dist.addSpan); plus one Request (~320 bytes) per request,
// plus two decoded row groups. When a distribution passes Options.MaxExactSamples it switches to
// a log-bucket histogram with relative error HistRelErr (0.1%), and the
// peak-throughput bins switch to 1 ms resolution; Summary.Approximate says
// so.
package analyze
