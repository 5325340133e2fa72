package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

func TestShardOutput(t *testing.T) {
	for _, c := range []struct {
		out     string
		i, n    int
		fromEnv bool
		want    string
	}{
		{"run-{shard}.parquet", 3, 16, true, "run-03.parquet"},
		{"run-{shard}.parquet", 3, 16, false, "run-03.parquet"},
		{"d/{shard}/run.parquet", 7, 10, true, "d/7/run.parquet"},
		{"run-{shard}.parquet", 0, 1, false, "run-0.parquet"},
		{"run-{shard}.parquet", 42, 101, true, "run-042.parquet"},
		{"out/run.parquet", 3, 16, true, "out/run.shard-03.parquet"},
		{"out.d/run", 1, 2, true, "out.d/run.shard-1"},
		{"out/run.parquet", 3, 16, false, "out/run.parquet"}, // explicit --shard keeps -o
		{"out/run.parquet", 0, 1, true, "out/run.parquet"},   // --shards 1: not sharded
	} {
		if got := shardOutput(c.out, c.i, c.n, c.fromEnv); got != c.want {
			t.Errorf("shardOutput(%q, %d, %d, %v) = %q, want %q", c.out, c.i, c.n, c.fromEnv, got, c.want)
		}
	}
}

func TestParseStartAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-01T12:00:00Z":        time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		"2026-12-01T13:00:00.5+01:00": time.Date(2026, 12, 1, 12, 0, 0, 5e8, time.UTC),
		"+30s":                        now.Add(30 * time.Second),
		"+3m":                         now.Add(3 * time.Minute),
	} {
		got, err := parseStartAt(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseStartAt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Beyond a day ahead is refused, and said so without overflowing.
	for _, far := range []string{"9999-12-31T23:59:59Z", "2026-12-02T11:00:01Z", "+24h0m1s", "+2562047h"} {
		_, err := parseStartAt(far, now)
		if err == nil || !strings.Contains(err.Error(), "--start-at "+far+" is more than 24h0m0s ahead") {
			t.Errorf("parseStartAt(%q): %v, want an error saying it is more than 24h ahead", far, err)
		}
	}
	if _, err := parseStartAt("2026-12-02T11:00:00Z", now); err != nil {
		t.Errorf("exactly a day ahead: %v", err)
	}
	for _, bad := range []string{"", "tomorrow", "+-5s", "+0s", "2026-12-01 12:00:00", "30s"} {
		if _, err := parseStartAt(bad, now); err == nil || !strings.Contains(err.Error(), "--start-at") {
			t.Errorf("parseStartAt(%q): %v, want an error naming --start-at", bad, err)
		}
	}
}

// The distributed-run flags' usage errors exit 2 naming what was wrong,
// before anything is downloaded, sent or written.
func TestReplayDistributedUsage(t *testing.T) {
	tr, target := replayFixture(t)
	dir := t.TempDir()
	common := []string{"replay", tr, "--target", target, "--progress", "none", "--no-analyze", "-o", filepath.Join(dir, "r-{shard}.parquet")}
	for _, c := range []struct {
		name string
		env  string // JOB_COMPLETION_INDEX; "-" unset
		args []string
		want string
	}{
		{"no index", "-", []string{"--shards", "4"}, "$JOB_COMPLETION_INDEX (Kubernetes sets it in Indexed Jobs), which is not set"},
		{"index too big", "4", []string{"--shards", "4"}, `$JOB_COMPLETION_INDEX="4": expected a shard index from 0 to 3 (--shards 4)`},
		{"index not a number", "x", []string{"--shards", "4"}, `$JOB_COMPLETION_INDEX="x"`},
		{"zero shards", "0", []string{"--shards", "0"}, "--shards 0"},
		{"disagree", "-", []string{"--shards", "4", "--shard", "1/2"}, "--shard 1/2 and --shards 4 disagree"},
		{"start-at syntax", "-", []string{"--start-at", "noon"}, `--start-at "noon": expected an RFC 3339 instant`},
		{"start-at passed", "-", []string{"--start-at", time.Now().Add(-90 * time.Second).UTC().Format(time.RFC3339)}, "passed 1m3"},
		{"run id", "-", []string{"--run-id", "a/b"}, `--run-id: run id "a/b"`},
		{"start-at absurd", "-", []string{"--start-at", "9999-12-31T23:59:59Z"}, "--start-at 9999-12-31T23:59:59Z is more than 24h0m0s ahead"},
	} {
		if c.env == "-" {
			os.Unsetenv(indexEnv)
		} else {
			t.Setenv(indexEnv, c.env)
		}
		_, stderr, code := runCLI(t, append(append([]string{}, common...), c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", c.name, code, stderr, c.want)
		}
	}
	os.Unsetenv(indexEnv)
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("usage errors left files: %v", names)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// The shard index from JOB_COMPLETION_INDEX names the output, the trace
// comes from a URL (credentials in it never reach the recording or the
// messages), the shard waits for --start-at, and the recording's metadata
// says which run and shard it is.
func TestReplayShardFromEnvAndURL(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	tr, target := replayFixture(t)
	body, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != "s3cr3t" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	src := strings.Replace(srv.URL, "http://", "http://me:pw-s3cr3t@", 1) + "/trace.parquet?token=s3cr3t"
	dir := filepath.Join(t.TempDir(), "results", "bench") // made by replay
	t.Setenv(indexEnv, "1")
	start := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano)
	stdout, stderr, code := runCLI(t, "replay", src, "--target", target, "--progress", "none", "--no-analyze",
		"--model", "tracekit-mock", "--shards", "2", "--run-id", "bench-7", "--start-at", start, "-o", filepath.Join(dir, "run.parquet"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, "s3cr3t") {
		t.Errorf("a credential in the output: %s%s", stdout, stderr)
	}
	if names := listDir(t, dir); len(names) != 1 || names[0] != "run.shard-1.parquet" {
		t.Fatalf("files %v, want run.shard-1.parquet alone (the download removed)", names)
	}
	recs, meta, err := trace.ReadRecords(filepath.Join(dir, "run.shard-1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "run.shard-1.parquet"))
	if strings.Contains(string(raw), "s3cr3t") {
		t.Error("a credential is in the recording file")
	}
	want, _ := time.Parse(time.RFC3339Nano, start)
	if meta.RunID != "bench-7" || meta.Shard == nil || *meta.Shard != (trace.RunShard{Index: 1, Count: 2}) ||
		meta.Clock == nil || meta.Clock.StartAtNs != want.UnixNano() || meta.StartWallNs != want.UnixNano() {
		t.Errorf("meta run id %q shard %+v clock %+v start %d", meta.RunID, meta.Shard, meta.Clock, meta.StartWallNs)
	}
	if got := meta.Config["trace"]; got != strings.Replace(srv.URL, "http://", "http://REDACTED@", 1)+"/trace.parquet?token=REDACTED" {
		t.Errorf("recorded trace %v", got)
	}
	for _, r := range recs {
		if r.Shard != 1 {
			t.Errorf("%s recorded by shard %d", r.RequestID, r.Shard)
		}
	}
	if len(recs) == 0 || len(recs) == 4 {
		t.Errorf("shard 1 of 2 replayed %d of the 4 requests", len(recs))
	}
}

// A URL serving something that is not a trace exits 2 naming the URL
// (redacted) before the clock starts, and leaves nothing behind; so does
// a start instant that passes while the targets are being waited for.
func TestReplayBadURLAndLateStart(t *testing.T) {
	_, target := replayFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>a login page</html>"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	src := srv.URL + "/t.parquet?sig=s3cr3t"
	_, stderr, code := runCLI(t, "replay", src, "--target", target, "--progress", "none", "--no-analyze", "-o", filepath.Join(dir, "r.parquet"))
	if code != ExitUsage || !strings.Contains(stderr, "trace "+srv.URL+"/t.parquet?sig=REDACTED: the 25 bytes downloaded are not a tracekit trace") ||
		strings.Contains(stderr, "s3cr3t") {
		t.Errorf("garbage URL: exit %d, stderr %q", code, stderr)
	}
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}

	// The target answers its ready checks only once the instant has passed:
	// the shard refuses to start late, and the older recording it was told
	// to replace (--force) stays as it was.
	startAt := time.Now().Add(300 * time.Millisecond)
	proxy := httputil.NewSingleHostReverseProxy(mustParse(t, target))
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/health" || r.URL.Path == "/v1/models") && time.Now().Before(startAt.Add(200*time.Millisecond)) {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer late.Close()
	tr, _ := replayFixture(t)
	old := filepath.Join(dir, "old.parquet")
	os.WriteFile(old, []byte("older recording"), 0o644)
	_, stderr, code = runCLI(t, "replay", tr, "--target", late.URL, "--progress", "none", "--no-analyze", "--ready-timeout", "30s",
		"--start-at", startAt.UTC().Format(time.RFC3339Nano), "-o", old, "--force")
	if code != ExitUsage || !strings.Contains(stderr, "--start-at "+startAt.UTC().Format(time.RFC3339Nano)+" passed ") {
		t.Errorf("late start: exit %d, stderr %q", code, stderr)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Errorf("files after the late start: %v, want old.parquet alone", names)
	}
	if b, _ := os.ReadFile(old); string(b) != "older recording" {
		t.Errorf("the older recording was replaced: %q", b)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// analyze DIR/ merges the shards of one run in it, naming what it
// skipped, and refuses a directory holding two runs (exit 2, both ids).
func TestAnalyzeDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, run string, shard int) {
		meta := trace.RunMeta{RunID: run, StartWallNs: 1.7e18, Shard: &trace.RunShard{Index: shard, Count: 2}}
		w, err := trace.NewRecordWriter(filepath.Join(dir, name), meta)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(trace.Record{RequestID: name, SentNs: 1e6, DoneNs: 30e6, Status: 200, PromptTokens: 5, CompletionTokens: 2,
			CachedTokens: -1, EventNs: []int64{10e6, 30e6}, EventTokens: []int32{1, 1}})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("run-0.parquet", "bench-1", 0)
	write("run-1.parquet", "bench-1", 1)
	if err := trace.WriteTrace(filepath.Join(dir, "trace.parquet"), trace.TraceMeta{}, []trace.Turn{{ConversationID: "c"}}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "analyze", dir+"/")
	if code != ExitOK || !strings.Contains(out, "Successful requests:                     2 ") ||
		!strings.Contains(stderr, "skipped "+filepath.Join(dir, "trace.parquet")+": not a recording") {
		t.Errorf("exit %d\n%s\n%s", code, out, stderr)
	}
	write("other.parquet", "bench-2", 0)
	_, stderr, code = runCLI(t, "analyze", dir)
	if code != ExitUsage || !strings.Contains(stderr, `"bench-2"`) || !strings.Contains(stderr, `"bench-1"`) {
		t.Errorf("two runs: exit %d, %s", code, stderr)
	}
}
