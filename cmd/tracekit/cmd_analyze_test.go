package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

func writeRun(t *testing.T, path string, ttftMs int64) {
	t.Helper()
	w, err := trace.NewRecordWriter(path, trace.RunMeta{StartWallNs: 1.7e18})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(10) {
		sent := i * 100e6
		first := sent + ttftMs*1e6
		w.Write(trace.Record{RequestID: string(rune('a' + i)), IntendedNs: sent, SlotNs: sent, SentNs: sent,
			DoneNs: first + 20e6, Status: 200, PromptTokens: 10, CompletionTokens: 3, CachedTokens: -1,
			EventNs: []int64{first, first + 10e6, first + 20e6}, EventTokens: []int32{1, 1, 1}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAnalyzeAndCompareCLI(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	writeRun(t, a, 100)
	writeRun(t, b, 150)
	js, html, csv := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "r.csv")
	out, stderr, code := runCLI(t, "analyze", a, "--percentiles", "50,90", "--metrics", "ttft,itl,e2el",
		"--goodput", "ttft:120 e2el:500", "--json", js, "--html", html, "--per-request", csv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Successful requests:                     10        ",
		"Request goodput (req/s):", "P90 TTFT (ms):                           100.00    ", "Mean ITL (ms):                           10.00     "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var res map[string]any
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &res); err != nil || res["p90_ttft_ms"] != 100.0 || res["completed"] != 10.0 {
		t.Errorf("json: %v %v", err, res["p90_ttft_ms"])
	}
	for _, f := range []string{html, csv} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	// A glob of both runs analyzes 20 requests as one run.
	out, _, code = runCLI(t, "analyze", filepath.Join(dir, "*.parquet"), "-q", "--json", js)
	raw, _ = os.ReadFile(js)
	if code != 0 || !bytes.Contains(raw, []byte(`"completed": 20`)) {
		t.Errorf("glob: exit %d, json %s", code, raw[:min(len(raw), 300)])
	}
	out, stderr, code = runCLI(t, "compare", a, b)
	if code != 0 || !strings.Contains(out, "Mean TTFT (ms)") || !strings.Contains(out, "+50.00%") {
		t.Errorf("compare: exit %d\n%s%s", code, out, stderr)
	}
}

func TestAnalyzeBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeRun(t, good, 100)
	raw, _ := os.ReadFile(good)
	os.WriteFile(filepath.Join(dir, "empty.parquet"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "trunc.parquet"), raw[:len(raw)-40], 0o644)
	os.WriteFile(filepath.Join(dir, "text.parquet"), []byte("hello"), 0o644)
	tw, _ := trace.NewTraceWriter(filepath.Join(dir, "trace.parquet"), trace.TraceMeta{})
	tw.Write(trace.Turn{ConversationID: "c"})
	tw.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", filepath.Join(dir, "empty.parquet")}, "empty.parquet is not a readable Parquet file"},
		{[]string{"analyze", filepath.Join(dir, "trunc.parquet")}, "trunc.parquet is not a readable Parquet file"},
		{[]string{"analyze", filepath.Join(dir, "text.parquet")}, "not a readable Parquet file"},
		{[]string{"analyze", filepath.Join(dir, "trace.parquet")}, "expected a tracekit.recording file"},
		{[]string{"analyze", filepath.Join(dir, "none*.parquet")}, "matches no file"},
		{[]string{"analyze", good, "--window", "5m-1m"}, "end must be after start"},
		{[]string{"analyze", good, "--goodput", "ttfb:5"}, "unknown metric"},
		{[]string{"analyze", good, "--itl", "mean"}, "expected per-event"},
		{[]string{"analyze", good, "--per-request", filepath.Join(dir, "x.txt")}, "expected a .parquet or .csv"},
		{[]string{"compare", good, filepath.Join(dir, "empty.parquet")}, "not a readable Parquet file"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args[1:], code, stderr, c.want)
		}
	}
}

// The two commands print the same median TTFT for one file.
func TestInspectAnalyzeSameMedian(t *testing.T) {
	const p = "../../testdata/recording-v1.parquet"
	ins, stderr, code := runCLI(t, "inspect", p)
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, stderr)
	}
	ana, stderr, code := runCLI(t, "analyze", p)
	if code != 0 {
		t.Fatalf("analyze: exit %d %s", code, stderr)
	}
	var insP50, anaMedian float64
	for _, line := range strings.Split(ins, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "TTFT (ms)") {
			f := strings.Fields(line)
			for i := range f {
				if f[i] == "p50" {
					insP50, _ = strconv.ParseFloat(f[i+1], 64)
				}
			}
		}
	}
	for _, line := range strings.Split(ana, "\n") {
		if strings.HasPrefix(line, "Median TTFT (ms):") {
			anaMedian, _ = strconv.ParseFloat(strings.Fields(line)[3], 64)
		}
	}
	if insP50 == 0 || fmt.Sprintf("%.2f", insP50) != fmt.Sprintf("%.2f", anaMedian) {
		t.Errorf("inspect p50 TTFT %v, analyze median %v\n%s", insP50, anaMedian, ins)
	}
}

// A run of chat and embeddings: the text has a section per endpoint, the
// JSON tracekit.endpoints, the HTML a section each, the per-request CSV
// the endpoint column.
func TestAnalyzeEndpointsCLI(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.parquet")
	w, err := trace.NewRecordWriter(p, trace.RunMeta{StartWallNs: 1.7e18})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(4) {
		sent := i * 100e6
		r := trace.Record{RequestID: fmt.Sprint("r", i), IntendedNs: sent, SlotNs: sent, SentNs: sent, DoneNs: sent + 50e6,
			Status: 200, PromptTokens: 10, CompletionTokens: 2, CachedTokens: -1, ReasoningTokens: -1, Endpoint: trace.EndpointChat,
			EventNs: []int64{sent + 20e6, sent + 40e6}, EventTokens: []int32{1, 1}}
		if i%2 == 1 { // an embeddings batch of 4 inputs, 40 ms
			r.Endpoint, r.CompletionTokens, r.Items, r.NonStreaming = trace.EndpointEmbeddings, -1, 4, true
			r.DoneNs, r.EventNs, r.EventTokens = sent+40e6, []int64{sent + 40e6}, []int32{0}
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	js, html, csv := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "r.csv")
	out, stderr, code := runCLI(t, "analyze", p, "--percentiles", "50,90", "--json", js, "--html", html, "--per-request", csv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Requests by endpoint:                    chat 2, embeddings 2",
		"Endpoint: chat (generating)", "Endpoint: embeddings (non-generating)",
		"Mean TTFT (ms):                          20.00", "Items (embeddings or results):           8"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var res struct {
		TTFT     float64 `json:"mean_ttft_ms"`
		Tracekit struct {
			Endpoints map[string]struct {
				Completed int `json:"completed"`
				Latency   struct {
					Mean float64 `json:"mean_ms"`
				} `json:"latency"`
			} `json:"endpoints"`
		} `json:"tracekit"`
	}
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if e := res.Tracekit.Endpoints["embeddings"]; res.TTFT != 20 || e.Completed != 2 || e.Latency.Mean != 40 {
		t.Errorf("json: ttft %v, embeddings %+v", res.TTFT, e)
	}
	page, _ := os.ReadFile(html)
	csvText, _ := os.ReadFile(csv)
	if !strings.Contains(string(page), `id="endpoint-embeddings"`) || !strings.Contains(strings.SplitN(string(csvText), "\n", 2)[0], ",endpoint,") ||
		!strings.Contains(string(csvText), ",embeddings,") {
		t.Errorf("html or csv lacks the endpoints:\n%s", csvText)
	}
}

// A --window beyond the run selects nothing: exit 2 naming the run's
// span, and no report claiming zeros; a window inside it analyzes.
func TestAnalyzeEmptyWindowExits2(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.parquet") // requests sent from 0 to 0.9 s
	writeRun(t, run, 100)
	js, html := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	for _, args := range [][]string{
		{"analyze", run, "--window", "300s-400s", "--json", js, "--html", html},
		{"compare", run, run, "--window", "300s-400s"},
	} {
		out, stderr, code := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "--window 300s-400s selects no request: the run spans 0s-0.9s") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	for _, f := range []string{js, html} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written for an empty window", f)
		}
	}
	out, stderr, code := runCLI(t, "analyze", run, "--window", "500ms-")
	if code != ExitOK || !strings.Contains(out, "Successful requests:                     5 ") {
		t.Errorf("window inside the run: exit %d\n%s%s", code, out, stderr)
	}
}

// analyze's reports go through a temporary file renamed into place: a
// report over an old one replaces it whole, no temporary file stays
// beside it, and a report that cannot be written (its directory is a
// file) fails without a partial file.
func TestAnalyzeReportsWrittenWhole(t *testing.T) {
	dir := t.TempDir()
	rec, js, html := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	writeRun(t, rec, 100)
	for _, p := range []string{js, html} {
		if err := os.WriteFile(p, []byte("an older report, longer than nothing"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := runCLI(t, "analyze", rec, "--json", js, "--html", html); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res map[string]any
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &res); err != nil || res["completed"] != 10.0 {
		t.Errorf("r.json is not the new report: %v %q", err, raw[:min(len(raw), 60)])
	}
	if b, _ := os.ReadFile(html); !strings.HasPrefix(string(b), "<!DOCTYPE html>") {
		t.Errorf("r.html is not the new report: %q", b[:min(len(b), 60)])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want the recording and the two reports", names)
	}
	bad := filepath.Join(rec, "r.json") // under a file: cannot be created
	if _, _, code := runCLI(t, "analyze", rec, "--json", bad); code == ExitOK {
		t.Error("a report under a file was written")
	}
}
