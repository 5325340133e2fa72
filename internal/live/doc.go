// Package live keeps the rolling figures of a run while it goes and shows
// them: a terminal dashboard (Dashboard, bubbletea) and a small web page of
// server-sent events (Server).
//
// In: finished records, handed over by the recorder's writer goroutine
// through Feed.Offer (record.RecorderOptions.Tap; a capture's segments
// through Feed.OfferAt, which puts each segment's times on the proxy's
// clock), never by the request goroutines or the proxy's forwarding: the
// hot path is untouched. Offer summarizes the record into a
// Sample and sends it on a bounded channel without waiting; when the view
// falls behind the sample is dropped and counted (Snapshot.Dropped), the
// recorder never slows. The counters of the run (done, in flight, failed),
// the client's health and the server's scrape status come from Sources,
// polled when a Snapshot is taken (a proxy has no client health: the
// dashboard and the page leave it out when Health.Cores is 0).
//
// Out: Snapshot, the figures over the last Window (default 10 s) of the
// run clock. Latency percentiles (TTFT, ITL, E2EL) are nearest-rank
// percentiles of a log-bucketed histogram (buckets 2% wide, a value
// reported as its bucket's geometric middle: within 1% of the exact
// nearest-rank value). The window is made of 10 slots of Window/10 keyed
// by each record's done time, so it spans the last 9 whole slots and the
// current one; an ITL gap counts in the slot its request ended in. Rates
// (requests/s, output tokens/s) divide the window's counts by the time the
// window covers (less than Window at the start of the run).
package live
