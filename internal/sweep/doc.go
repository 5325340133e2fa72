// Package sweep answers "how much of this traffic can the deployment take
// under my SLO?": it runs a trace at a ladder of loads, or searches for the
// highest load that meets an SLO, one normal recording per step.
//
// Data flow:
//
//	Plan (axis + ladder or search) ──> Run ──> Stepper.Step(load) per step
//	                                              │ ReplayStepper: a fresh replay.Record per step
//	                                              │ ──> Watch (early stop) ──> record.Recorder
//	                                              │ ──> DIR/step-NN-<axis>-<value>.parquet
//	                                              │ ──> drain ──> analyze.Files ──> Measure ──> .html
//	                                              v
//	                             StepResult ──> Criteria.Judge ──> next load
//	                                              │
//	                                              v
//	                 Summary (steps, knee, answer) ──> sweep.json, sweep.parquet,
//	                                                   sweep.html, sweep.txt; Compare
//
// The search depends only on the Stepper interface, so it is tested with a
// fake of known capacity; ReplayStepper is the real one.
//
// # Load axes
//
//   - speed: replay's time scale: speed s sends the captured traffic s times
//     as fast (start offsets and think times divided by s).
//   - rate R, conversation starts per second: the trace's start offsets are
//     re-timed so their mean rate is R, each gap scaled by (mean gap) /
//     (1/R), which keeps the trace's own burstiness. That is exactly speed
//     R / TraceRate, with TraceRate = (starts - 1) / (last start - first
//     start) over the whole trace, and it is run as such: think times scale
//     too, as under speed.
//   - max-concurrency C: closed-loop capacity: C virtual users, at most C
//     conversations active and C requests in flight; conversations start
//     as soon as a user is free (or on the trace's schedule at a given
//     speed).
//
// # SLO, goodput and a passing step
//
// An SLO is a list of objectives METRIC:pP:THRESHOLD over ttft, tpot, itl
// and e2el. Two forms are measured on the step's measured (non-warm-up)
// requests:
//
//   - Per-request goodput (vLLM's --goodput): a request is good when it
//     succeeded and each objective's metric, for that request, is at most
//     its threshold: TTFT, TPOT ((E2EL - TTFT) / (output tokens - 1), 0 for
//     one token) and E2EL as vLLM defines them, ITL as the request's mean
//     inter-token gap (last event - first event) / (output tokens - 1). The
//     good fraction is good / measured requests (failures are not good);
//     vLLM's request goodput is good / benchmark duration.
//   - Percentile form: the step meets the SLO when, for each objective, the
//     P-th percentile (numpy's linear method, as analyze) of the metric over
//     the successful requests is at most its threshold; ITL is vLLM's pooled
//     per-event gaps.
//
// A step passes when it ran to its end (not stopped early, not
// interrupted), some request succeeded, its error rate (failed / measured;
// requests the sweep itself canceled when it stopped the step are left
// out) is at most MaxErrorRate, the percentile form holds, its good
// fraction reaches GoodputTarget when one is set, and the client did not
// distort it: dispatch lag p99, Go scheduler latency p99 (both from the
// recording's run health) and send delay p99 at most MaxClientLag, and CPU
// at most MaxClientCPU of the cores. A distorted step is marked and never
// chosen as the answer.
//
// # Early stop
//
// See Watch: a step stops once it is certain to fail (more failed, or more
// samples above a threshold, than the step's planned request count
// allows), or once its SLO has been broken by a wide margin (the running
// percentile above WideMargin x the threshold) for LongEnough of the step.
//
// # Search
//
// Bracket: start at Start; while steps pass double the load (up to Max),
// while they fail halve it (down to Min), until one passing load lo and one
// failing load hi = the next step up are known. Bisect: run the geometric
// mean of lo and hi and replace lo or hi until hi / lo - 1 <= Resolution
// (on the integer max-concurrency axis, or until hi - lo <= 1). A load
// whose step the client distorted but which would otherwise have passed is
// run again up to RetryDistorted times; a distorted step counts as not
// passing. The answer is lo, reported with the
// steps at lo and hi. Without a passing load there is no answer, and
// Answer.Reason says why: no load met the SLO, or (Unmeasured) the lowest
// load met every objective and only the client's own health check failed,
// so the client could not measure faithfully. A step whose requests failed
// while its target stopped answering is no verdict: the stepper returns an
// error, the sweep stops, and a stopped sweep has no answer either. With
// the answer A between Start x 2^(k-1) and Start x
// 2^k the bracket takes k + 1 steps, and the bisection
// ceil(log2(ln 2 / ln(1 + Resolution))) more: 4 at 5%.
//
// # Knee
//
// Among the steps that ran to their end undistorted, the highest steady
// throughput T (completions between the 10th and 90th percentile
// completion per second) is the saturation throughput; the knee is the
// lowest-load step reaching KneeShare (95%) of T.
//
// # Files
//
// DIR holds per step step-NN-<axis>-<value>.parquet (a normal recording:
// analyze and compare read it) and its analyze report .html; sweep.json
// (Summary, read back by ReadSummary and compare), sweep.parquet (Row: one
// per step), sweep.html (offline: inline SVG, links to every step's report)
// and sweep.txt (the table). They are rewritten after every step through
// temporary files, so an interrupted or killed sweep keeps every finished
// step.
package sweep
