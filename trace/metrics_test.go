package trace

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestMetricsPath(t *testing.T) {
	for in, want := range map[string]string{
		"run.parquet":         "run.metrics.parquet",
		"/a/b/run.parquet":    "/a/b/run.metrics.parquet",
		"run":                 "run.metrics.parquet",
		"dir.parquet/x.other": "dir.parquet/x.other.metrics.parquet",
	} {
		if got := MetricsPath(in); got != want {
			t.Errorf("MetricsPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// metricRows builds n scrapes of a small page: a status row, a gauge, a
// histogram with three buckets, its sum and count.
func metricRows(n int) []MetricSample {
	var rows []MetricSample
	target := "http://127.0.0.1:8000/metrics"
	model := Label{"model_name", "m"}
	for i := range n {
		sent := int64(i) * 1e9
		read := sent + 2e6
		at := func(r MetricSample) MetricSample {
			r.SentNs, r.ReadNs, r.TimeNs, r.Target = sent, read, sent+(read-sent)/2, target
			return r
		}
		rows = append(rows,
			at(MetricSample{Name: ScrapeRowName, Type: MetricScrape, Value: 1, Status: 200}),
			at(MetricSample{Name: "vllm:num_requests_running", Family: "vllm:num_requests_running", Type: MetricGauge, Labels: []Label{model}, Value: float64(i % 7)}),
		)
		for j, le := range []string{"0.1", "1", "+Inf"} {
			rows = append(rows, at(MetricSample{Name: "ttft_bucket", Family: "ttft", Type: MetricHistogram,
				Labels: []Label{{"le", le}, model}, Value: float64(i * (j + 1))}))
		}
		rows = append(rows,
			at(MetricSample{Name: "ttft_sum", Family: "ttft", Type: MetricHistogram, Labels: []Label{model}, Value: float64(i) * 0.37}),
			at(MetricSample{Name: "ttft_count", Family: "ttft", Type: MetricHistogram, Labels: []Label{model}, Value: float64(i * 3)}),
		)
		if i%10 == 9 {
			rows = append(rows, at(MetricSample{Name: ScrapeRowName, Type: MetricScrape, ErrorKind: ScrapeTimeout,
				ErrorMessage: "GET " + target + ": no answer within 1s"}))
		}
	}
	return rows
}

func TestMetricsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MetricsPath("run.parquet"))
	meta := MetricsMeta{StartWallNs: 1700000000e9, StartMonoNs: 123456789, Endpoints: []string{"http://127.0.0.1:8000/metrics"},
		IntervalNs: 1e9, TimeoutNs: 5e8, Recording: "run.parquet"}
	w, err := NewMetricsWriter(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	// More rows than a row group, written a scrape at a time as the scraper does.
	rows := metricRows(1500)
	if len(rows) <= 2*RowGroupRows {
		t.Fatalf("test needs several row groups, has %d rows", len(rows))
	}
	for i := 0; i < len(rows); i += 7 {
		if err := w.Write(rows[i:min(i+7, len(rows))]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sidecar is in place before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != int64(len(rows)) {
		t.Errorf("Rows() = %d, want %d", w.Rows(), len(rows))
	}
	got, gotMeta, err := ReadMetricsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta.TracekitVersion = Version
	if !reflect.DeepEqual(gotMeta, meta) {
		t.Errorf("meta = %+v, want %+v", gotMeta, meta)
	}
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(rows))
	}
	for i := range rows {
		if len(rows[i].Labels) == 0 {
			rows[i].Labels = got[i].Labels // nil and empty lists read back alike
		}
		if !reflect.DeepEqual(got[i], rows[i]) {
			t.Fatalf("row %d = %+v, want %+v", i, got[i], rows[i])
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d files after Close, want only the sidecar", len(entries))
	}
}

func TestMetricsWriterRefusesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.metrics.parquet")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetricsWriter(path, MetricsMeta{}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("NewMetricsWriter over an existing file: %v, want os.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Errorf("existing file changed to %q", b)
	}

	// A file appearing during the run is not replaced either.
	path2 := filepath.Join(t.TempDir(), "b.metrics.parquet")
	w, err := NewMetricsWriter(path2, MetricsMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(metricRows(2)...); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path2, []byte("other"), 0o644)
	if err := w.Close(); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Close over a file created meanwhile: %v, want os.ErrExist", err)
	}
	if b, _ := os.ReadFile(path2); string(b) != "other" {
		t.Errorf("file created during the run replaced: %q", b)
	}
}

func TestMetricsAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := NewMetricsWriter(filepath.Join(dir, "x.metrics.parquet"), MetricsMeta{})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(metricRows(3)...)
	w.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Abort left %d files", len(entries))
	}
}

func TestOpenMetricsFileRefusesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.parquet")
	rw, err := NewRecordWriter(rec, RunMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMetricsFile(rec); !errors.Is(err, ErrWrongFormat) {
		t.Errorf("OpenMetricsFile(recording) = %v, want ErrWrongFormat", err)
	}
	// A sidecar is not a recording either.
	mp := MetricsPath(rec)
	mw, err := NewMetricsWriter(mp, MetricsMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRecording(mp); !errors.Is(err, ErrWrongFormat) {
		t.Errorf("OpenRecording(sidecar) = %v, want ErrWrongFormat", err)
	}
	rows, _, err := ReadMetricsFile(mp)
	if err != nil || len(rows) != 0 {
		t.Errorf("empty sidecar: %d rows, %v", len(rows), err)
	}
}

func TestMetricsValuesSurvive(t *testing.T) {
	// Exposition values include NaN and infinities; Parquet doubles keep them.
	path := filepath.Join(t.TempDir(), "v.metrics.parquet")
	w, err := NewMetricsWriter(path, MetricsMeta{})
	if err != nil {
		t.Fatal(err)
	}
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.5, 1e300}
	for i, v := range vals {
		w.Write(MetricSample{Name: "g" + strconv.Itoa(i), Type: MetricGauge, Value: v})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := ReadMetricsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		g := got[i].Value
		if !(g == v || math.IsNaN(g) && math.IsNaN(v)) {
			t.Errorf("value %d = %v, want %v", i, g, v)
		}
	}
}
