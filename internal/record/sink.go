package record

import (
	"sync"

	"github.com/tracekit/tracekit/trace"
)

// Sink takes the finished records of a run. Submit must copy what it keeps
// (the caller reuses the record's slices) and must never wait on disk: it
// is called from the read loop's goroutine.
type Sink interface {
	Submit(rec *trace.Record)
	SetRunMeta(meta trace.RunMeta)
}

var (
	_ Sink = (*Recorder)(nil)
	_ Sink = (*Memory)(nil)
)

// Memory is a Sink that keeps copies of its records in memory, for tests
// and for calibrate, which joins a step's records with the mock's log
// without writing them first. It is safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	recs []trace.Record
	meta trace.RunMeta
}

// Submit keeps a deep copy of rec.
func (m *Memory) Submit(rec *trace.Record) {
	c := *rec
	c.EventNs = append([]int64(nil), rec.EventNs...)
	c.EventTokens = append([]int32(nil), rec.EventTokens...)
	m.mu.Lock()
	m.recs = append(m.recs, c)
	m.mu.Unlock()
}

// SetRunMeta keeps the latest run metadata.
func (m *Memory) SetRunMeta(meta trace.RunMeta) {
	m.mu.Lock()
	m.meta = meta
	m.mu.Unlock()
}

// Records returns a copy of the list of records submitted so far, in
// submission order.
func (m *Memory) Records() []trace.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]trace.Record(nil), m.recs...)
}

// RunMeta returns the latest run metadata set.
func (m *Memory) RunMeta() trace.RunMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta
}
