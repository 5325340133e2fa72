package analyze

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// shardMeta is the metadata of shard i of n of run id, started at wall
// (ns) with a wake lag, on host, with its clock's sync state and estimated
// error.
func shardMeta(id string, i, n int, wall, lag int64, host, sync string, estErr int64) trace.RunMeta {
	return trace.RunMeta{RunID: id, Shard: &trace.RunShard{Index: i, Count: n}, StartWallNs: wall, Host: host,
		Clock: &trace.RunClock{StartAtNs: wall, StartLagNs: lag, Sync: sync, EstErrorNs: estErr}}
}

func oneRequest(id string) []trace.Record {
	return []trace.Record{rec(id, 0, 0, 0, 0, 50, 200, "", 10, 10, 2, -1, [2]int64{10, 1}, [2]int64{20, 1})}
}

// A directory stands for its recordings: traces, metrics sidecars, hidden
// files and other files are skipped (journals with a word about recover),
// and a .parquet file that cannot be read is an error, not skipped.
func TestExpandRunsDirectory(t *testing.T) {
	dir := t.TempDir()
	a := writeRecording(t, dir, "run-0.parquet", shardMeta("r1", 0, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("a"))
	b := writeRecording(t, dir, "run-1.parquet", shardMeta("r1", 1, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("b"))
	if err := trace.WriteTrace(filepath.Join(dir, "trace.parquet"), trace.TraceMeta{}, []trace.Turn{{ConversationID: "c"}}); err != nil {
		t.Fatal(err)
	}
	mw, err := trace.NewMetricsWriter(trace.MetricsPath(a), trace.MetricsMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"run-2.parquet.journal": "x", ".tracekit-trace-1.download": "x", "notes.txt": "x", "report.html": "x"} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub.parquet"), 0o755)
	paths, skipped, err := ExpandRuns([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || paths[0] != a || paths[1] != b {
		t.Errorf("paths %v", paths)
	}
	joined := strings.Join(skipped, "\n")
	for _, want := range []string{"run-0.metrics.parquet: not a recording", "trace.parquet: not a recording", "run-2.parquet.journal: the journal of a run that did not finish"} {
		if !strings.Contains(joined, want) {
			t.Errorf("skipped lacks %q:\n%s", want, joined)
		}
	}
	if len(skipped) != 3 {
		t.Errorf("skipped %d, want 3:\n%s", len(skipped), joined)
	}
	s, err := Files(paths, Options{})
	if err != nil || s.Requests != 2 {
		t.Fatalf("merged: %v, %+v", err, s)
	}

	os.WriteFile(filepath.Join(dir, "broken.parquet"), []byte("PAR1 cut short"), 0o644)
	if _, _, err := ExpandRuns([]string{dir}); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "broken.parquet is not a readable Parquet file") {
		t.Errorf("a broken recording in the directory: %v", err)
	}
	if _, _, err := ExpandRuns([]string{t.TempDir()}); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "holds no recording") {
		t.Errorf("an empty directory: %v", err)
	}
}

// Recordings of different runs, a recording with a run id beside one
// without, two files of one shard and different shard counts are refused
// with both files named.
func TestMergeRefusesMixedRuns(t *testing.T) {
	dir := t.TempDir()
	r1s0 := writeRecording(t, dir, "r1-0.parquet", shardMeta("run-a", 0, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("a"))
	r1s1 := writeRecording(t, dir, "r1-1.parquet", shardMeta("run-a", 1, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("b"))
	r2s1 := writeRecording(t, dir, "r2-1.parquet", shardMeta("run-b", 1, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("c"))
	again := writeRecording(t, dir, "r1-1-again.parquet", shardMeta("run-a", 1, 2, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("d"))
	of4 := writeRecording(t, dir, "r1-of4.parquet", shardMeta("run-a", 3, 4, 1e18, 0, "h", trace.ClockSynced, 0), oneRequest("e"))
	old := writeRecording(t, dir, "old.parquet", trace.RunMeta{StartWallNs: 1e18}, oneRequest("f"))
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{r1s0, r2s1}, `r1-0.parquet is of run "run-a" and ` + r2s1 + ` of run "run-b": they are not shards of one run`},
		{[]string{r1s0, r1s1, again}, `run "run-a": ` + r1s1 + ` and ` + again + ` are both shard 1`},
		{[]string{r1s0, of4}, `is shard 0 of 2 but ` + of4 + ` is shard 3 of 4`},
		{[]string{old, r1s0}, r1s0 + ` is of run "run-a" and ` + old + ` has no run id`},
	} {
		_, err := Files(c.paths, Options{})
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want a bad-input error saying %q", c.paths, err, c.want)
		}
	}
	s, err := Files([]string{r1s0, r1s1}, Options{})
	if err != nil || s.Requests != 2 || s.Clocks == nil || len(s.Clocks.Missing) != 0 {
		t.Fatalf("one run's shards: %v %+v", err, s)
	}
}

// The clock warnings: a start spread above the resolution, hosts whose
// clocks are not synchronized, error bounds above the resolution, and a
// missing shard; none for shards that agree.
func TestShardClockWarnings(t *testing.T) {
	const us = 1000
	for _, c := range []struct {
		name       string
		metas      []trace.RunMeta
		want       []string // in the warnings
		spread     int64
		bound      int64
		hosts      int
		noWarnings bool
	}{
		{"agree on one host", []trace.RunMeta{
			shardMeta("r", 0, 2, 1e18, 3*us, "h", trace.ClockUnsynced, 0),
			shardMeta("r", 1, 2, 1e18, 8*us, "h", trace.ClockUnsynced, 0),
		}, nil, 5 * us, 0, 1, true},
		{"late wake", []trace.RunMeta{
			shardMeta("r", 0, 2, 1e18, 3*us, "h", trace.ClockSynced, 0),
			shardMeta("r", 1, 2, 1e18, 2500*us, "h", trace.ClockSynced, 0),
		}, []string{"the shards' clocks started 2.50 ms apart", "requests due before a shard's clock started left late by up to that"}, 2497 * us, 0, 1, false},
		{"no barrier", []trace.RunMeta{
			{RunID: "r", Shard: &trace.RunShard{Index: 0, Count: 2}, StartWallNs: 1e18},
			{RunID: "r", Shard: &trace.RunShard{Index: 1, Count: 2}, StartWallNs: 1e18 + 40*us},
		}, []string{"started 40.0 us apart", "offset by up to that against one another (no common --start-at)"}, 40 * us, 0, 1, false},
		{"synced hosts within the resolution", []trace.RunMeta{
			shardMeta("r", 0, 2, 1e18, 0, "a", trace.ClockSynced, 4*us),
			shardMeta("r", 1, 2, 1e18, 0, "b", trace.ClockSynced, 5*us),
		}, nil, 0, 9 * us, 2, true},
		{"synced hosts beyond it", []trace.RunMeta{
			shardMeta("r", 0, 3, 1e18, 0, "a", trace.ClockSynced, 400*us),
			shardMeta("r", 1, 3, 1e18, 0, "b", trace.ClockSynced, 900*us),
			shardMeta("r", 2, 3, 1e18, 0, "c", trace.ClockSynced, 50*us),
		}, []string{"3 hosts whose wall clocks may disagree by up to 1.30 ms"}, 0, 1300 * us, 3, false},
		{"an unsynchronized host", []trace.RunMeta{
			shardMeta("r", 0, 3, 1e18, 0, "a", trace.ClockSynced, 4*us),
			shardMeta("r", 2, 3, 1e18, 0, "b", trace.ClockUnknown, 0),
		}, []string{"is not synchronized: the merged timeline", "(unknown)", `run "r": shard 1 of 3 missing`}, 0, -1, 2, false},
	} {
		dir := t.TempDir()
		var paths []string
		for i, m := range c.metas {
			paths = append(paths, writeRecording(t, dir, "s"+string(rune('0'+i))+".parquet", m, oneRequest(string(rune('a'+i)))))
		}
		s, err := Files(paths, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := strings.Join(s.Warnings, "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: warnings lack %q:\n%s", c.name, w, got)
			}
		}
		if c.noWarnings && got != "" {
			t.Errorf("%s: unexpected warnings:\n%s", c.name, got)
		}
		if k := s.Clocks; k == nil || k.StartSpreadNs != c.spread || k.ErrorBoundNs != c.bound || k.Hosts != c.hosts {
			t.Errorf("%s: clocks %+v, want spread %d bound %d hosts %d", c.name, k, c.spread, c.bound, c.hosts)
		}
	}
}
