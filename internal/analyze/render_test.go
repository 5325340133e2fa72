package analyze

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

func handSummary(t *testing.T) *Summary {
	t.Helper()
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{StartWallNs: 1_700_000_000e9,
		Health: &trace.Health{DispatchLagP50Ns: 1e5, DispatchLagP99Ns: 8e6, DispatchLagMaxNs: 9e6}}, handRecords())
	s, err := Files([]string{p}, Options{Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPerRequestParquetAndCSV(t *testing.T) {
	s := handSummary(t)
	dir := t.TempDir()
	pq, cs := filepath.Join(dir, "req.parquet"), filepath.Join(dir, "req.csv")
	if err := s.WritePerRequest(pq); err != nil {
		t.Fatal(err)
	}
	if err := s.WritePerRequest(cs); err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.ReadFile[RequestRow](pq)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5 (warm-up excluded)", len(rows))
	}
	r1 := rows[0]
	if r1.RequestID != "r1" || !r1.Success || r1.TTFTms != 100 || r1.TPOTms != 50 || r1.E2ELms != 300 ||
		r1.CorrectedE2ELms != 400 || r1.QueueMs != 50 || r1.SendDelayMs != 50 || r1.OutputTokens != 5 || r1.CachedTokens != 40 {
		t.Errorf("row r1 = %+v", r1)
	}
	if rows[3].ErrorKind != string(trace.ErrHTTPStatus) || rows[3].Success {
		t.Errorf("row r4 = %+v", rows[3])
	}
	f, _ := os.Open(cs)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 || recs[0][0] != "request_id" || recs[0][19] != "ttft_ms" {
		t.Fatalf("csv header %v, %d lines", recs[0], len(recs))
	}
	if v, _ := strconv.ParseFloat(recs[5][19], 64); v != 100 {
		t.Errorf("csv r6 ttft_ms = %s, want 100", recs[5][19])
	}
	if err := s.WritePerRequest(filepath.Join(dir, "x.txt")); err == nil {
		t.Error("a .txt per-request file must be refused")
	}
}

func TestTextJSONAgreeAndWarn(t *testing.T) {
	s := handSummary(t)
	var text, js bytes.Buffer
	s.WriteText(&text)
	s.WriteJSON(&js, false)
	// The health figures say p99 dispatch lag 8 ms: a warning in both.
	if !strings.Contains(text.String(), "WARNING: ") || !strings.Contains(js.String(), "dispatch lag p99 8.00 ms") {
		t.Errorf("no dispatch-lag warning:\n%s", text.String())
	}
	if !strings.Contains(js.String(), `"mean_e2el_ms": 633.33333`) || !strings.Contains(text.String(), "Mean E2EL (ms):                          633.33") {
		t.Error("text and JSON disagree on mean E2EL")
	}
}

func TestCompare(t *testing.T) {
	a := handSummary(t)
	recs := handRecords()
	for i := range recs { // B: every event 10% later relative to its send
		for k := range recs[i].EventNs {
			recs[i].EventNs[k] += (recs[i].EventNs[k] - recs[i].SentNs) / 10
		}
	}
	p := writeRecording(t, t.TempDir(), "b.parquet", trace.RunMeta{}, recs)
	b, err := Files([]string{p}, Options{Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	rows := Compare(a, b)
	var found bool
	for _, r := range rows {
		if r.Name == "Mean TTFT (ms)" {
			found = true
			near(t, "ttft pct", r.Pct, 10)
			if r.Better != -1 {
				t.Errorf("slower TTFT marked %d, want -1 (worse)", r.Better)
			}
		}
	}
	if !found {
		t.Fatal("no Mean TTFT row")
	}
	var out bytes.Buffer
	WriteCompare(&out, a, b, "a.parquet", "b.parquet")
	if !strings.Contains(out.String(), "+10.00%") || !strings.Contains(out.String(), "Mean TTFT (ms)") {
		t.Errorf("compare output:\n%s", out.String())
	}
}

func TestHTMLSelfContained(t *testing.T) {
	s := handSummary(t)
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	for _, id := range []string{"ttft-cdf", "itl-cdf", "ttft-time", "latency-time", "throughput-time", "requests-time", "concurrency-time", "ttft-turn", "dispatch-lag"} {
		if !strings.Contains(h, `id="`+id+`"`) {
			t.Errorf("HTML lacks chart %s", id)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script", "src="} {
		if strings.Contains(strings.ReplaceAll(h, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("HTML refers to %q: it must work offline", bad)
		}
	}
	if strings.Count(h, "<polyline") < 10 {
		t.Errorf("only %d polylines", strings.Count(h, "<polyline"))
	}
}

// TestApproximateModeSaysSo pushes every distribution past a tiny
// MaxExactSamples: figures stay within the histogram error and the text
// says percentiles are approximate.
func TestApproximateModeSaysSo(t *testing.T) {
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	s, err := Files([]string{p}, Options{MaxExactSamples: 2, Metrics: allMetrics})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Approximate {
		t.Fatal("Approximate not set")
	}
	near(t, "peak output (1 ms bins)", s.MaxOutputTokensPerS, 6)
	near(t, "mean itl", s.ITL.Mean, 240)
	if got, want := s.ITL.Percentiles[0].Value, 868.0; math.Abs(got-want)/want > HistRelErr {
		t.Errorf("p99 itl %v, want %v within %v", got, want, HistRelErr)
	}
	var b bytes.Buffer
	s.WriteText(&b)
	if !strings.Contains(b.String(), "relative error <= 0.1%") {
		t.Error("text does not say the percentiles are approximate")
	}
}
