package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// SidecarOptions configure StartSidecar: the scraping of one run into the
// sidecar of its recording.
type SidecarOptions struct {
	// Recording is the path of the run's recording; the sidecar goes to
	// trace.MetricsPath(Recording) unless Path is set.
	Recording string
	// Path overrides the sidecar's path (a capture writes one sidecar for
	// all its segments).
	Path string
	// Endpoints, Interval, Timeout, Header, Client and OpenMetrics are the
	// scraper's (see Options).
	Endpoints         []string
	Interval, Timeout time.Duration
	Header            http.Header
	Client            *http.Client
	OpenMetrics       bool
	// Replace allows an existing sidecar at the path: the new one replaces
	// it once complete (Finish), as a recording replaced under --force.
	// Without it an existing file is refused (wrapping os.ErrExist).
	Replace bool
}

// Sidecar is a scraper running for one run and the file it writes.
//
// Its clock's zero is the moment StartSidecar was called, stored as
// MetricsMeta.StartMonoNs (and StartWallNs): the scraper is started just
// before the run, whose own zero is RunMeta.StartMonoNs, so a sample at
// sidecar time t is at t + MetricsMeta.StartMonoNs - RunMeta.StartMonoNs
// on the recording's clock. Analysis aligns the two; the run needs to know
// nothing of the scraper.
type Sidecar struct {
	o      SidecarOptions
	path   string // where the sidecar ends up
	w      *trace.MetricsWriter
	s      *Scraper
	zero   int64
	once   sync.Once
	result SidecarResult
	err    error
}

// SidecarResult is what Finish reports.
type SidecarResult struct {
	Path      string          // the sidecar, complete
	Rows      int64           // rows written
	Endpoints []EndpointStats // per endpoint, as recorded
}

// StartSidecar checks that the sidecar may be written, opens it and starts
// scraping (Scraper.Start) at once; ctx bounds the scraping as Stop does.
func StartSidecar(ctx context.Context, o SidecarOptions) (*Sidecar, error) {
	path := o.Path
	if path == "" {
		if o.Recording == "" {
			return nil, errors.New("telemetry: SidecarOptions needs a Recording or a Path")
		}
		path = trace.MetricsPath(o.Recording)
	}
	writeTo := path
	if _, err := os.Lstat(path); err == nil {
		if !o.Replace {
			return nil, fmt.Errorf("%s exists: refusing to replace a sidecar: %w", path, os.ErrExist)
		}
		// Written beside it and moved over it only once complete.
		writeTo = filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
		os.Remove(writeTo) // a killed earlier run's leftover: ours
	}
	sc := &Sidecar{o: o, path: path, zero: clock.Mono()}
	wall := clock.Wall()
	so := Options{Endpoints: o.Endpoints, Interval: o.Interval, Timeout: o.Timeout, Header: o.Header,
		Client: o.Client, OpenMetrics: o.OpenMetrics, Clock: func() int64 { return clock.Mono() - sc.zero }}
	meta := MetricsMeta(so, trace.RunMeta{StartWallNs: wall, StartMonoNs: sc.zero}, "")
	if o.Recording != "" {
		meta.Recording = filepath.Base(o.Recording)
	}
	w, err := trace.NewMetricsWriter(writeTo, meta)
	if err != nil {
		return nil, fmt.Errorf("opening the telemetry sidecar: %w", err)
	}
	so.Sink = w
	s, err := New(so)
	if err != nil {
		w.Abort()
		return nil, err
	}
	sc.w, sc.s = w, s
	if err := s.Start(ctx); err != nil {
		w.Abort()
		return nil, err
	}
	return sc, nil
}

// Path is where the sidecar is (once Finish succeeded).
func (sc *Sidecar) Path() string { return sc.path }

// Name is the sidecar's base name, as trace.RunMeta.Metrics records it.
func (sc *Sidecar) Name() string { return filepath.Base(sc.path) }

// Endpoints are the scraped URLs as recorded.
func (sc *Sidecar) Endpoints() []string { return sc.s.Endpoints() }

// Finish stops scraping, takes one last scrape of every endpoint (the state
// at the run's end; bounded by the scrape timeout), completes the file and
// moves it into place. It is safe to call more than once; later calls
// return the first result. On an error the file is discarded.
func (sc *Sidecar) Finish() (SidecarResult, error) {
	sc.once.Do(func() {
		err := sc.s.Stop()
		if err == nil {
			err = sc.s.ScrapeOnce(context.Background()) // each request bounded by the scraper's timeout
		}
		sc.result = SidecarResult{Path: sc.path, Rows: sc.w.Rows(), Endpoints: sc.s.Stats()}
		if err != nil {
			sc.w.Abort()
			sc.err = err
			return
		}
		if err := sc.w.Close(); err != nil {
			sc.err = fmt.Errorf("writing the telemetry sidecar: %w", err)
			return
		}
		if staged := sc.w.Path(); staged != sc.path {
			if err := os.Rename(staged, sc.path); err != nil {
				os.Remove(staged)
				sc.err = fmt.Errorf("replacing %s: %w", sc.path, err)
				return
			}
			trace.SyncDir(filepath.Dir(sc.path))
		}
	})
	return sc.result, sc.err
}

// Abort stops scraping and discards the file (the run did not happen).
func (sc *Sidecar) Abort() {
	sc.once.Do(func() {
		sc.s.Stop()
		sc.w.Abort()
		sc.err = errors.New("telemetry: sidecar aborted")
	})
}

// Notes describe, one line per endpoint, the endpoints that failed: a
// missing /metrics (404) is a note, not an error: the run went on.
func (r SidecarResult) Notes() []string {
	var out []string
	for _, e := range r.Endpoints {
		switch {
		case e.Gone:
			out = append(out, fmt.Sprintf("%s: no metrics endpoint (HTTP 404); not scraped", e.Target))
		case e.Failures > 0:
			out = append(out, fmt.Sprintf("%s: %d of %d scrapes failed, the last: %s", e.Target, e.Failures, e.Scrapes, e.LastError))
		}
	}
	return out
}

// MetaSink passes records through to a record.Sink and adds the sidecar's
// name (trace.RunMeta.Metrics) to every run metadata it forwards, so a
// replay records it without knowing of telemetry.
type MetaSink struct {
	next record.Sink
	name string

	mu      sync.Mutex
	last    trace.RunMeta
	have    bool
	dropped bool
}

var _ record.Sink = (*MetaSink)(nil)

// NewMetaSink wraps next; name is Sidecar.Name().
func NewMetaSink(next record.Sink, name string) *MetaSink {
	return &MetaSink{next: next, name: name}
}

// Submit forwards rec.
func (m *MetaSink) Submit(rec *trace.Record) { m.next.Submit(rec) }

// SetRunMeta forwards meta with Metrics set (unless Drop was called).
func (m *MetaSink) SetRunMeta(meta trace.RunMeta) {
	m.mu.Lock()
	if !m.dropped {
		meta.Metrics = m.name
	}
	m.last, m.have = meta, true
	m.mu.Unlock()
	m.next.SetRunMeta(meta)
}

// Drop forgets the sidecar (it could not be completed): the last run
// metadata is forwarded again without its name.
func (m *MetaSink) Drop() {
	m.mu.Lock()
	m.dropped = true
	meta, have := m.last, m.have
	m.mu.Unlock()
	if have {
		meta.Metrics = ""
		m.next.SetRunMeta(meta)
	}
}

// Stats counts each endpoint's scrapes so far (a live view's figures).
func (sc *Sidecar) Stats() []EndpointStats { return sc.s.Stats() }
