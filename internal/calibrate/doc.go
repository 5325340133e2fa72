// Package calibrate measures how faithfully this machine's tracekit client
// records a server: it replays synthetic loads against a mock whose
// ground-truth log says when every event was really written, joins the two,
// and reports per load step how far the client's stamps are from the truth.
//
// Data flow of one step (Run, step.go):
//
//	Step ──> trace (one-turn conversations sized to the step) ──> replay.Record
//	           │ (in memory: replay.MemorySource)                    │ record.Memory
//	           v                                                     v (with Config.Dir: recording.parquet)
//	mock (in this process, a `tracekit mock` child, or --target) ──> records
//	           │ ground-truth log (per event: CLOCK_MONOTONIC after write+flush)
//	           v
//	Join (join.go): record ↔ log entry by request id (the X-Request-Id replay
//	sends), event i ↔ event i; diff = client stamp - server write time
//	           │
//	           v
//	Result: dispatch lag, error quantiles after removing the offset (whole
//	step, and steady state: see below), CPU, RSS, matched/unmatched events,
//	pass/fail against MaxError
//
// # Per endpoint
//
// Config.Endpoints runs every step, the probe included, once per API
// (Step.Endpoint; each endpoint with its own probe and offset). A
// streaming API joins event by event: the mock logs and the client records
// the same events, those that carry output (chat's role chunk included;
// Responses' and Messages' opening, closing and ping events on neither
// side), so event i is event i; Join counts the requests where the counts
// differ as unmatched, and token mismatches where the client's exact usage
// disagrees with the log. Embeddings, rerank and score answer one body:
// the client's body-complete stamp is paired with the mock's write of the
// body (Result.Join "body").
//
// # The offset
//
// Client and mock stamp with the same clock (clock.Mono, CLOCK_MONOTONIC), so
// diff is the loopback transit plus the client's delay in reading and
// stamping, minus the mock's own delay between write and stamp. The
// constant part (the kernel's loopback hand-off and one wake-up) is not the
// client's fault and is removed: it is estimated once per run as the median
// diff of a quiet probe step (ProbeStreams streams at ProbeEventsPerS, run
// before the ladder), and that one offset is subtracted from every step.
// A median of an idle step rather than a per-step minimum or median: a
// per-step median would hide a loaded step's systematic lateness, and a
// minimum is set by one lucky or mis-stamped event. Errors can therefore be
// slightly negative (the mock stamped late). With --target on another host
// the two monotonic clocks differ by an arbitrary constant; the probe's
// median absorbs it the same way.
//
// # Steady state
//
// A stream step's whole-step figures include its ramp: N streams open
// their connections over min(1s, duration/4) (accepts, dials, request
// parsing) while the streams already open emit, a CPU burst in which their
// events are read late; and its tail, in which streams end one by one.
// Each stream step therefore also reports its error over the steady-state
// window, the span in which every stream of the step is open but at most
// k = floor(streams/100) stragglers at either end, in the mock's write
// time:
//
//	from = the (k+1)-th latest first-event write time of the step's streams
//	to   = the (k+1)-th earliest last-event write time
//	steady events = matched events written strictly inside (from, to)
//
// (below 100 streams: the latest first write and the earliest last one;
// a single connection that took seconds to open would otherwise leave a
// 10,000-stream step without a window)
//
// with p50/p99/max of their errors (same offset), the window's start
// (after the step's first write), its length and its event count
// (Result.Steady), and the client's CPU over it per event and per second:
// the client's CPU (this process and its arrival observer) is sampled
// every 250 ms during the step and read off at the window's ends, moved
// to the client's clock by the step's median difference, by linear
// interpolation. Per-request costs (dial, request write, headers, the
// record) fall mostly in the ramp and the tail, so this is the cost of
// an event once every stream is open. It is reported next to the whole-step figures and does
// not change them or the pass/fail rule, which stays on the whole step: a
// real benchmark has its ramp too. Rate steps have no such window (their
// short requests are never all open at once).
//
// # Beside requests with images
//
// RunMedia (media.go) is a step of its own: text streams alone, then the
// same beside requests carrying an image of megabytes each, each against
// a fresh mock; only the text streams are joined, so the two error
// figures say whether sending large bodies delays other streams' stamps.
//
// # Where the mock runs
//
// ModeProcess (the default) runs `tracekit mock` as a child process per
// step, so the mock's goroutines and GC do not run inside the client whose
// CPU, RSS and scheduling are being measured; ModeInProcess runs mock.Start
// in this process (no executable needed; client figures then include the
// mock). Either way both share this machine's cores, which the report says.
// Process is the default after measuring both on a 2-core machine
// (1,000-10,000 streams, 500-5,000 req/s): the error figures were alike at
// low load, but in-process the client's RSS and CPU include the mock's
// (351 MiB against 181 MiB at 5,000 streams), and 10,000 streams need
// 20,000+ descriptors in one process, over the usual 20,000 limit (2,943
// requests failed); Run now refuses such a step up front.
// With Target, the mock is already running elsewhere, started with
// --emit-log; its log is complete only when it stops, so Run waits (up to
// LogWait) for the log file at MockLog to become readable and joins then.
package calibrate
