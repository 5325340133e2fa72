package trace

import (
	"strings"
	"testing"
)

// A recording written before RunMeta.Load has the model only in its
// config map: LoadSettings falls back to it; a typed Load wins.
func TestLoadSettingsFallback(t *testing.T) {
	_, meta, err := ReadRecords("../testdata/recording-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if meta.Load != nil {
		t.Fatal("the v1 recording has no typed load")
	}
	if l := meta.LoadSettings(); l != (RunLoad{Model: "tracekit-mock"}) {
		t.Errorf("fallback %+v, want the config's model and nothing else", l)
	}
	meta.Load = &RunLoad{Model: "typed", MaxConcurrency: 4, RequestRate: 2.5, Burstiness: 0.5}
	if l := meta.LoadSettings(); l != *meta.Load {
		t.Errorf("typed %+v, want %+v", l, *meta.Load)
	}
	old := RunMeta{Config: map[string]any{"max_concurrency": 8.0, "request_rate": "3", "burstiness": 2.0}}
	if l := old.LoadSettings(); l.MaxConcurrency != 8 || l.RequestRate != 3 || l.Burstiness != 2 {
		t.Errorf("config fallback %+v", l)
	}
}

// One cause gives one warning: the v1 recording stored the scheduler
// verdict, and Assess gives it once.
func TestAssessOneWarningPerCause(t *testing.T) {
	_, meta, err := ReadRecords("../testdata/recording-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	w := meta.Health.Assess()
	if len(w) != 1 || !strings.Contains(w[0], "Go scheduler latency p99 6.29 ms") {
		t.Errorf("v1 health verdicts %q", w)
	}
	h := Health{DispatchLagP99Ns: 2e6, SchedLatP99Ns: 1e5, CPUSeconds: 3.5, WallSeconds: 2, Cores: 2}
	w = h.Assess()
	if len(w) != 2 || !strings.Contains(w[0], "dispatch lag p99 2.00 ms") || !strings.Contains(w[1], "1.8 of 2 cores") {
		t.Errorf("verdicts %q", w)
	}
	// Without Cores (an older file) the recorder's CPU verdict is kept, the
	// figure-based ones are recomputed, not repeated.
	old := Health{DispatchLagP99Ns: 2e6, Warnings: []string{"dispatch lag p99 2.00 ms: requests left later than scheduled", "the client used 1.9 of 2 cores: it was CPU-bound and its timings are suspect"}}
	if w := old.Assess(); len(w) != 2 || !strings.Contains(w[1], "CPU-bound") {
		t.Errorf("old verdicts %q", w)
	}
}
