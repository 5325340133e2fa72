package resultschema

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/internal/sweep"
)

// goodputType is the type of analyze's goodput option.
var goodputType analyze.SLO

func sortStrings(s []string) { sort.Strings(s) }

var update = flag.Bool("update", false, "rewrite the schema and its key reference from the Go types")

// repoRoot is the repository root seen from this package's directory.
const repoRoot = "../.."

// Generate builds the schema of every --json output from the types that
// encode them. The keys analyze writes from a map (vLLM's block) are
// listed by hand in vllmKeys.
func generate(t *testing.T) []byte {
	t.Helper()
	g := newGenerator(repoRoot)
	g.special[reflect.TypeOf(analyze.EndpointList{})] = func(g *generator) any {
		return map[string]any{"type": "object", "additionalProperties": g.schema(reflect.TypeOf(analyze.EndpointStats{}))}
	}
	summary := g.schema(reflect.TypeOf(analyze.Summary{}))
	tk := g.defs["analyze.Summary"].(map[string]any)
	tk["properties"].(map[string]any)["selection"] = selectionSchema(g)
	tk["required"] = append(tk["required"].([]string), "selection")
	sort.Strings(tk["required"].([]string))

	roots := map[string]any{
		OutputAnalyze:     analyzeSchema(summary),
		OutputAnalyzeRuns: withDescription(g.schema(reflect.TypeOf(analyze.RunSet{})), "analyze --runs --json: a run set's aggregate (also compare's run sets)."),
		OutputVerdict:     withDescription(g.schema(reflect.TypeOf(analyze.GateVerdict{})), "compare --verdict: the machine-readable outcome of --fail-on."),
		OutputSweep:       withDescription(g.schema(reflect.TypeOf(sweep.Summary{})), "sweep: sweep.json in --out, the whole sweep."),
		OutputCalibrate:   withDescription(g.schema(reflect.TypeOf(calibrate.Report{})), "calibrate --json: the timing calibration report."),
		OutputMedia:       withDescription(g.schema(reflect.TypeOf(calibrate.MediaReport{})), "calibrate --media-requests --json: the media step's report."),
	}
	if len(g.missing) > 0 {
		sort.Strings(g.missing)
		t.Errorf("%d keys without a description (comment the Go field or add to fieldDocs):\n%s", len(g.missing), strings.Join(g.missing, "\n"))
	}
	for k := range fieldDocs {
		if !g.used[k] {
			t.Errorf("fieldDocs describes %s, a key no result has", k)
		}
	}
	defs := map[string]any{}
	for k, v := range g.defs {
		defs[k] = v
	}
	var roots2 []any
	for _, k := range Outputs {
		defs[k] = roots[k]
		roots2 = append(roots2, map[string]any{"$ref": "#/$defs/" + k})
	}
	return marshal(map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         SchemaID,
		"title":       "tracekit results, version 1",
		"description": "Every JSON file tracekit writes as a result: analyze --json (one run or a run set), compare --verdict, sweep's sweep.json and calibrate --json. Version 1: keys are only ever added within a version; a key renamed, removed or changed in meaning makes version 2.",
		"anyOf":       roots2,
		"$defs":       defs,
	})
}

// Outputs names the root definitions, one per output.
var Outputs = []string{OutputAnalyze, OutputAnalyzeRuns, OutputVerdict, OutputSweep, OutputCalibrate, OutputMedia}

// The schema in the repository is the one the Go types give: regenerate
// with go test ./internal/resultschema -run TestSchemaUpToDate -update.
func TestSchemaUpToDate(t *testing.T) {
	got := generate(t)
	path := filepath.Join(repoRoot, SchemaPath)
	if *update {
		ref, err := reference(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repoRoot, referencePath), ref, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the Go types give: run go test ./internal/resultschema -run TestSchemaUpToDate -update", SchemaPath)
	}
}
