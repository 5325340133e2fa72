package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/resultschema"
	"github.com/tracekit/tracekit/internal/sweep"
)

// resultSchema is the compiled result schema, loaded once.
var resultSchema = sync.OnceValues(func() (*resultschema.Validator, error) {
	return resultschema.Load(filepath.Join(repoRoot, resultschema.SchemaPath))
})

// resultFile is a JSON result a command line writes: its path and the
// schema output it is.
type resultFile struct {
	path, output string
}

// resultOutputs lists the JSON results the command line args writes:
// analyze --json (a run, or with --runs or a set's name a run set: told
// apart by content), compare --verdict, sweep's sweep.json in --out and
// calibrate --json.
func resultOutputs(args []string) []resultFile {
	if len(args) == 0 {
		return nil
	}
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		return ""
	}
	var out []resultFile
	add := func(path, output string) {
		if path != "" {
			out = append(out, resultFile{path, output})
		}
	}
	switch args[0] {
	case "analyze":
		add(flag("--json"), "analyze?")
	case "compare":
		add(flag("--verdict"), resultschema.OutputVerdict)
	case "sweep":
		if d := flag("--out"); d != "" && (len(args) < 2 || args[1] != "compare") {
			add(filepath.Join(d, sweep.SummaryJSON), resultschema.OutputSweep)
		}
	case "calibrate":
		if flag("--media-requests") != "" {
			add(flag("--json"), resultschema.OutputMedia)
		} else {
			add(flag("--json"), resultschema.OutputCalibrate)
		}
	}
	return out
}

// statAll returns each file's modification time, zero when absent.
func statAll(files []resultFile) []time.Time {
	ts := make([]time.Time, len(files))
	for i, f := range files {
		if st, err := os.Stat(f.path); err == nil {
			ts[i] = st.ModTime()
		}
	}
	return ts
}

// checkResults validates each result file the command wrote (one that
// exists and changed since before) against its schema definition.
func checkResults(t *testing.T, files []resultFile, before []time.Time) {
	t.Helper()
	for i, f := range files {
		st, err := os.Stat(f.path)
		if err != nil || st.IsDir() || (!before[i].IsZero() && st.ModTime().Equal(before[i])) {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Errorf("reading %s: %v", f.path, err)
			continue
		}
		if err := validateResult(f.output, b); err != nil {
			t.Errorf("%s: %v", f.path, err)
		}
	}
}

// validateResult checks one result's bytes; output "analyze?" is analyze
// --json, a run or a run set by its keys.
func validateResult(output string, b []byte) error {
	v, err := resultSchema()
	if err != nil {
		return err
	}
	if output == "analyze?" {
		output = resultschema.OutputAnalyze
		if !strings.Contains(string(b), `"tracekit":`) {
			output = resultschema.OutputAnalyzeRuns
		}
	}
	return v.Validate(output, b)
}

// The schema cannot go stale: a key written beside the ones it lists, at
// the top, under "tracekit" or deeper, fails validation naming the key,
// and so does a value of the wrong type; the output as written passes.
func TestResultSchemaRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "2", "--turns", "2", "--input-tokens", "20", "--output-tokens", "8",
		"--rate", "0", "--seed", "1", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(time.Millisecond) })
	rec, js := filepath.Join(dir, "run.parquet"), filepath.Join(dir, "run.json")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--progress", "none", "--no-probe", "--no-analyze"); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "analyze", rec, "-q", "--json", js, "--json-detailed"); code != ExitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateResult(resultschema.OutputAnalyze, b); err != nil {
		t.Fatalf("analyze's own output: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	tk := doc["tracekit"].(map[string]any)
	for _, c := range []struct {
		name   string
		change func()
		undo   func()
		want   string
	}{
		{"top", func() { doc["p99_ttft_seconds"] = 1.0 }, func() { delete(doc, "p99_ttft_seconds") }, "p99_ttft_seconds"},
		{"tracekit", func() { tk["ttft_p99_new"] = 1.0 }, func() { delete(tk, "ttft_p99_new") }, "ttft_p99_new"},
		{"nested", func() { tk["ttft"].(map[string]any)["p999"] = 1.0 }, func() { delete(tk["ttft"].(map[string]any), "p999") }, "p999"},
		{"selection", func() { tk["selection"].(map[string]any)["seed"] = 1 }, func() { delete(tk["selection"].(map[string]any), "seed") }, "seed"},
		{"type", func() { doc["completed"] = "4" }, func() { doc["completed"] = tk["completed"] }, "completed"},
	} {
		c.change()
		changed, _ := json.Marshal(doc)
		err := validateResult(resultschema.OutputAnalyze, changed)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
		}
		c.undo()
	}
	same, _ := json.Marshal(doc)
	if err := validateResult(resultschema.OutputAnalyze, same); err != nil {
		t.Errorf("the output, decoded and encoded again: %v", err)
	}
}

// calibrate --json, a tiny in-process ladder: the report it writes is
// what the schema's calibrate definition says (runCLI validates it).
func TestCalibrateJSONMatchesSchema(t *testing.T) {
	js := filepath.Join(t.TempDir(), "cal.json")
	if stdout, stderr, code := runCLI(t, "calibrate", "--mock", "inprocess", "--streams", "4", "--duration", "300ms", "--json", js); code != ExitOK && code != ExitFailed {
		t.Fatalf("calibrate: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(js); err != nil {
		t.Fatalf("calibrate wrote no JSON: %v", err)
	}
}
