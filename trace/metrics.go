package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The telemetry sidecar: what a server's /metrics endpoint said while a
// run measured it, one row per sample, beside the recording it belongs to.
const (
	FormatMetrics        = "tracekit.metrics"
	MetricsSchemaVersion = 1
	MetaMetrics          = "tracekit.metrics_meta" // JSON of MetricsMeta
)

// MetricsFormat is the sidecar's FileFormat.
var MetricsFormat = FileFormat{FormatMetrics, MetricsSchemaVersion}

// Metric types of a MetricSample.Type: the exposition formats' types, and
// MetricScrape for a scrape's status row.
const (
	MetricCounter   = "counter"
	MetricGauge     = "gauge"
	MetricHistogram = "histogram"
	MetricSummary   = "summary"
	MetricUntyped   = "untyped"
	MetricScrape    = "scrape"
	// MetricGaugeHistogram is OpenMetrics' gauge histogram: NAME_bucket,
	// NAME_gsum and NAME_gcount rows; its buckets are not counters.
	MetricGaugeHistogram = "gaugehistogram"
)

// ScrapeRowName is the Name of every status row.
const ScrapeRowName = "tracekit_scrape"

// Error kinds of a status row; the empty string is a successful scrape.
// They are telemetry's own, independent of a Record's error kinds.
const (
	ScrapeOK         = ""
	ScrapeTimeout    = "timeout"     // no complete answer within the scrape timeout
	ScrapeConnect    = "connect"     // dial, TLS, write or read failure
	ScrapeHTTPStatus = "http_status" // a status other than 200 and 404
	ScrapeNotFound   = "not_found"   // 404: the target has no metrics endpoint; it is not scraped again
	ScrapeMalformed  = "malformed"   // the body is not valid exposition text (the message names the line)
	ScrapeTooLarge   = "too_large"   // the body exceeded the scraper's size limit
)

// Label is one label pair of a sample.
type Label struct {
	Name  string `parquet:"name,dict" json:"name"`
	Value string `parquet:"value,dict" json:"value"`
}

// MetricSample is one row of a metrics sidecar: one sample of one series in
// one scrape, or (Type == MetricScrape) the status row of a scrape.
//
// Times are nanoseconds of the run's monotonic clock from the run start, the
// clock of a recording: SentNs is stamped just before the request was handed
// to the HTTP client (so it includes any connect), ReadNs when the body had
// been read completely, and TimeNs = SentNs + (ReadNs-SentNs)/2 is the time
// analysis attributes the sample to. Every row of one scrape carries the same
// three stamps.
//
// Series are kept whole: a histogram is its NAME_bucket rows (label "le",
// in exposition order, +Inf included), NAME_sum and NAME_count; a summary its
// NAME rows (label "quantile"), NAME_sum and NAME_count. Family is the
// metric family (the name of the TYPE line, NAME above); Name the sample's
// own name. Labels are sorted by name. "le" and "quantile" values are
// written in Go's shortest float form ("1" for "1.0", "+Inf"), as Prometheus
// normalises them.
//
// A status row has Name ScrapeRowName, Value 1 when the scrape succeeded and
// 0 when it failed (Prometheus's "up"), Status the HTTP status (0 when none),
// and ErrorKind / ErrorMessage saying what failed. Its message never carries
// credentials.
type MetricSample struct {
	TimeNs int64  `parquet:"time_ns" json:"time_ns"`
	SentNs int64  `parquet:"sent_ns" json:"sent_ns"`
	ReadNs int64  `parquet:"read_ns" json:"read_ns"`
	Target string `parquet:"target,dict" json:"target"` // the metrics URL, without credentials or query

	Name   string  `parquet:"name,dict" json:"name"`
	Family string  `parquet:"family,dict" json:"family"`
	Type   string  `parquet:"type,dict" json:"type"`
	Labels []Label `parquet:"labels,list" json:"labels,omitempty"`
	Value  float64 `parquet:"value" json:"value"`

	Status       int32  `parquet:"status" json:"status,omitempty"`
	ErrorKind    string `parquet:"error_kind,dict" json:"error_kind,omitempty"`
	ErrorMessage string `parquet:"error_message" json:"error_message,omitempty"`
}

// MetricsMeta is the file-level description of a metrics sidecar.
type MetricsMeta struct {
	TracekitVersion string   `json:"tracekit_version"`
	StartWallNs     int64    `json:"start_wall_ns"` // run start, unix ns (the recording's)
	StartMonoNs     int64    `json:"start_mono_ns"` // run start, CLOCK_MONOTONIC ns (the recording's)
	Endpoints       []string `json:"endpoints"`     // metrics URLs, without credentials or query
	IntervalNs      int64    `json:"interval_ns"`
	TimeoutNs       int64    `json:"timeout_ns"`
	Recording       string   `json:"recording,omitempty"` // base name of the recording it sits beside
}

// MetricsPath is the sidecar path of a recording: "run.parquet" gives
// "run.metrics.parquet"; a path without the .parquet extension gets
// ".metrics.parquet" appended.
func MetricsPath(recording string) string {
	return strings.TrimSuffix(recording, ".parquet") + ".metrics.parquet"
}

// MetricsWriter streams MetricSample rows into a sidecar. Rows go to a
// temporary file in the target directory, flushed every RowGroupRows rows
// (bounded memory); Close renames it into place. A process killed before
// Close leaves only the temporary file (Parquet's footer is written last).
type MetricsWriter struct {
	w    *ParquetWriter[MetricSample]
	path string
	tmp  string
	done bool
}

// NewMetricsWriter starts a sidecar at path with meta in its footer. It
// refuses a path that exists (wrapping os.ErrExist): a caller that means to
// replace a sidecar removes it first.
func NewMetricsWriter(path string, meta MetricsMeta) (*MetricsWriter, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("creating %s: refusing to replace an existing file: %w", path, os.ErrExist)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	w, err := CreateParquet[MetricSample](tmp, MetricsFormat)
	if err != nil {
		return nil, err
	}
	if meta.TracekitVersion == "" {
		meta.TracekitVersion = Version
	}
	if err := w.setJSON(MetaMetrics, meta); err != nil {
		w.f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &MetricsWriter{w: w, path: path, tmp: tmp}, nil
}

// Write appends rows. The rows' memory may be reused once it returns.
func (m *MetricsWriter) Write(rows ...MetricSample) error { return m.w.write(rows) }

// Rows is the number of rows written so far.
func (m *MetricsWriter) Rows() int64 { return m.w.rows }

// Path is where Close puts the file.
func (m *MetricsWriter) Path() string { return m.path }

// Close finishes the file and renames it into place; it refuses (and
// leaves the temporary file) if something created path meanwhile.
func (m *MetricsWriter) Close() error {
	if m.done {
		return nil
	}
	m.done = true
	if err := m.w.close(); err != nil {
		os.Remove(m.tmp)
		return err
	}
	if _, err := os.Lstat(m.path); err == nil {
		return fmt.Errorf("finishing %s: refusing to replace a file created during the run (the sidecar is in %s): %w", m.path, m.tmp, os.ErrExist)
	}
	if err := os.Rename(m.tmp, m.path); err != nil {
		return fmt.Errorf("finishing %s: %w", m.path, err)
	}
	SyncDir(filepath.Dir(m.path))
	return nil
}

// Abort discards the file.
func (m *MetricsWriter) Abort() {
	if m.done {
		return
	}
	m.done = true
	m.w.w.Close()
	m.w.f.Close()
	os.Remove(m.tmp)
}

// MetricsReader reads a sidecar in row order.
type MetricsReader struct {
	r    *ParquetReader[MetricSample]
	Meta MetricsMeta
}

// OpenMetricsFile opens and validates a metrics sidecar.
func OpenMetricsFile(path string) (*MetricsReader, error) {
	r, err := OpenParquet[MetricSample](path, MetricsFormat)
	if err != nil {
		return nil, err
	}
	mr := &MetricsReader{r: r}
	if err := r.json(MetaMetrics, &mr.Meta); err != nil {
		r.close()
		return nil, err
	}
	return mr, nil
}

// NumRows is the number of rows in the file.
func (m *MetricsReader) NumRows() int64 { return m.r.pf.NumRows() }

// Read fills rows and returns how many it read; io.EOF at the end. The
// reader may reuse the Labels slices already in rows: copy them before
// handing the same rows to Read again.
func (m *MetricsReader) Read(rows []MetricSample) (int, error) { return m.r.read(rows) }

// Close releases the file.
func (m *MetricsReader) Close() error { return m.r.close() }

// ReadMetricsFile reads a whole sidecar into memory (a run's telemetry is
// small: hundreds of series a second).
func ReadMetricsFile(path string) ([]MetricSample, MetricsMeta, error) {
	r, err := OpenMetricsFile(path)
	if err != nil {
		return nil, MetricsMeta{}, err
	}
	defer r.Close()
	rows, err := r.r.ReadAll()
	return rows, r.Meta, err
}
