package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/trace"
	"github.com/tracekit/tracekit/trace/tracetest"
)

// duckQuery runs SQL in DuckDB through its Node.js bindings installed under
// modules (`make notebook-check` installs them) and returns the rows.
func duckQuery(t *testing.T, modules, sql string) []map[string]any {
	t.Helper()
	script := filepath.Join(modules, "tracekit-query.mjs")
	os.WriteFile(script, []byte(`import { DuckDBInstance } from '@duckdb/node-api';
const c = await (await DuckDBInstance.create(':memory:')).connect();
const r = await c.runAndReadAll(process.argv[2]);
console.log(JSON.stringify(r.getRowObjectsJson()));
`), 0o644)
	out, err := exec.Command("node", script, sql).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("duckdb output: %v\n%s", err, out)
	}
	return rows
}

// duckColumns returns the DuckDB type of every column of a Parquet
// schema, names unquoted.
func duckColumns(t *testing.T, schema parquet.Node) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range schema.Fields() {
		m[f.Name()] = duckType(t, f)
	}
	return m
}

// duckType is the DuckDB type DuckDB reads a Parquet node as: a LIST (or
// a repeated field) as T[], a group as STRUCT(name T, ...).
func duckType(t *testing.T, n parquet.Node) string {
	t.Helper()
	var logical format.LogicalTypeValue
	if lt := n.Type().LogicalType(); lt != nil {
		logical = lt.Value
	}
	_, isList := logical.(*format.ListType)
	_, isString := logical.(*format.StringType)
	var ty string
	switch {
	case !n.Leaf() && isList: // LIST -> repeated group -> element
		return duckType(t, n.Fields()[0].Fields()[0]) + "[]"
	case !n.Leaf():
		var fs []string
		for _, f := range n.Fields() {
			fs = append(fs, f.Name()+" "+duckType(t, f))
		}
		ty = "STRUCT(" + strings.Join(fs, ", ") + ")"
	case isString:
		ty = "VARCHAR"
	default:
		switch n.Type().Kind() {
		case parquet.Boolean:
			ty = "BOOLEAN"
		case parquet.Int32:
			ty = "INTEGER"
		case parquet.Int64:
			ty = "BIGINT"
		case parquet.Float:
			ty = "FLOAT"
		case parquet.Double:
			ty = "DOUBLE"
		case parquet.ByteArray:
			ty = "BLOB"
		default:
			t.Fatalf("no DuckDB type known for the Parquet type %v", n.Type())
		}
	}
	if n.Repeated() {
		ty += "[]"
	}
	return ty
}

// The files open in DuckDB with the documented column types, and the
// queries of docs/formats.md give the numbers tracekit computes. Opt-in: it needs
// Node.js and DuckDB's bindings (TRACEKIT_DUCKDB_NODE names the folder
// holding node_modules/@duckdb/node-api; `make notebook-check` sets it up).
func TestFilesOpenInDuckDB(t *testing.T) {
	modules := os.Getenv("TRACEKIT_DUCKDB_NODE")
	if modules == "" {
		t.Skip("TRACEKIT_DUCKDB_NODE not set: run make notebook-check")
	}
	dir := t.TempDir()
	bin := tracekitBinary(t)
	tr, rec, req := filepath.Join(dir, "trace.parquet"), filepath.Join(dir, "rec.parquet"), filepath.Join(dir, "req.parquet")
	// Enough events (some 20,000) for pages of event doubles that trace's
	// codec cuts into one zstd block per byte stream.
	if _, stderr, code := runCLI(t, "synth", "--conversations", "60", "--turns", "2-3", "--output-tokens", "200-400", "--rate", "0", "-o", tr); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	url, stop := startMock(t, bin, "--decode-base", "1ms")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", url, "--no-analyze", "--progress", "none", "-o", rec); code != 0 {
		t.Fatalf("replay: %s", stderr)
	}
	stop()
	if _, stderr, code := runCLI(t, "analyze", rec, "-q", "--per-request", req); code != 0 {
		t.Fatalf("analyze: %s", stderr)
	}

	for _, rg := range tracetest.OpenParquet(t, rec).Metadata().RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.PathInSchema[0] == "event_gap_us" && c.MetaData.TotalUncompressedSize < 64<<10 {
				t.Fatalf("event_gap_us holds %d bytes in a row group: fewer than a page trace cuts into blocks (64 KiB)", c.MetaData.TotalUncompressedSize)
			}
		}
	}

	types := func(path string) map[string]string {
		m := map[string]string{}
		for _, r := range duckQuery(t, modules, "DESCRIBE SELECT * FROM '"+path+"'") {
			m[r["column_name"].(string)] = r["column_type"].(string)
		}
		return m
	}
	// The expected types come from the Go row types the files are written
	// from (the recording's from its schema: trace writes it from a row
	// type of its own), so a new field is checked without touching this
	// test.
	want := map[string]map[string]string{tr: duckColumns(t, parquet.SchemaOf(trace.Turn{})),
		rec: duckColumns(t, tracetest.OpenParquet(t, rec).Schema()), req: duckColumns(t, parquet.SchemaOf(analyze.RequestRow{}))}
	for path, cols := range want {
		got := types(path)
		for c, ty := range cols {
			// DuckDB quotes the names that are SQL keywords ("role", "name").
			if g := strings.ReplaceAll(got[c], `"`, ""); g != ty {
				t.Errorf("%s: column %s is %q, want %q", filepath.Base(path), c, got[c], ty)
			}
		}
	}
	// A few types pinned outright, so a wrong derivation cannot pass.
	for path, cols := range map[string]map[string]string{
		tr:  {"conversation_id": "VARCHAR", "turn": "INTEGER", "start_offset_ns": "BIGINT", "prefix_hashes": "BIGINT[]", "output_tokens": "INTEGER"},
		rec: {"request_id": "VARCHAR", "sent_ns": "BIGINT", "event_gap_us": "DOUBLE[]", "event_tokens": "INTEGER[]", "error_kind": "VARCHAR"},
		req: {"ttft_ms": "DOUBLE", "success": "BOOLEAN", "turn": "INTEGER"},
	} {
		for c, ty := range cols {
			if want[path][c] != ty {
				t.Errorf("%s: column %s: the schema gives %q, want %q", filepath.Base(path), c, want[path][c], ty)
			}
		}
	}
	// The per-event queries of docs/formats.md give every event of the
	// recording at the run-relative time tracekit reads (the file holds
	// microsecond gaps from sent_ns, whole numbers in doubles): each
	// request's times, in order, as strings (BIGINT as text).
	doc, err := os.ReadFile("../../docs/formats.md")
	if err != nil {
		t.Fatal(err)
	}
	times := map[string]string{}
	for _, r := range readRecords(t, rec) {
		times[r.RequestID+"/"+strconv.Itoa(int(r.Attempt))] = fmt.Sprint(r.EventNs)
	}
	for _, q := range []struct{ doc, perRequest string }{
		{docEventRows, "SELECT request_id, attempt, list(t_ns ORDER BY i)::BIGINT[]::VARCHAR[] AS t FROM (" + docEventRows + ") GROUP BY ALL"},
		{docEventLists, "SELECT request_id, attempt, event_times_ns::BIGINT[]::VARCHAR[] AS t FROM (" + docEventLists + ")"},
	} {
		if !strings.Contains(string(doc), q.doc) {
			t.Errorf("docs/formats.md no longer holds the query\n%s", q.doc)
		}
		sql := strings.ReplaceAll(q.perRequest, "'recording.parquet'", "'"+rec+"'")
		got := map[string]string{}
		for _, r := range duckQuery(t, modules, sql) {
			var ts []string
			for _, v := range r["t"].([]any) {
				ts = append(ts, v.(string))
			}
			got[r["request_id"].(string)+"/"+fmt.Sprint(r["attempt"])] = "[" + strings.Join(ts, " ") + "]"
		}
		for k, w := range times {
			if _, ok := got[k]; !ok && w == "[]" {
				continue // a request without events has no row in the per-event query
			}
			if got[k] != w {
				t.Errorf("request %s: duckdb gives event times %s, tracekit reads %s", k, got[k], w)
			}
		}
		if len(got) > len(times) {
			t.Errorf("duckdb gives %d requests, the recording holds %d", len(got), len(times))
		}
	}
	rows := duckQuery(t, modules, "SELECT value::VARCHAR AS v FROM parquet_kv_metadata('"+rec+"') WHERE key::VARCHAR = 'tracekit.format'")
	if len(rows) != 1 || rows[0]["v"] != "tracekit.recording" {
		t.Errorf("kv metadata: %v", rows)
	}
}

// The event queries of docs/formats.md, as the document spells them.
const (
	docEventRows = `WITH r AS (SELECT row_number() OVER () AS row, * FROM 'recording.parquet')
SELECT request_id, attempt, i, sent_ns + 1000 * sum(gap_us) OVER (PARTITION BY row ORDER BY i) AS t_ns, tokens
FROM (SELECT row, request_id, attempt, sent_ns, unnest(event_gap_us::BIGINT[]) AS gap_us, unnest(event_tokens) AS tokens,
             generate_subscripts(event_gap_us, 1) AS i FROM r)`
	docEventLists = `SELECT request_id, attempt,
       list_transform(gaps, (g, i) -> sent_ns + 1000 * list_sum(gaps[:i])) AS event_times_ns
FROM (SELECT *, event_gap_us::BIGINT[] AS gaps FROM 'recording.parquet')`
)
