package analyze

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
	"github.com/tracekit/tracekit/trace/tracetest"
)

// TestPerRequestEveryFieldRoundTrips writes per-request rows with every
// field set to a distinct non-zero value as Parquet and as CSV, reads them
// back and compares, so a column added to RequestRow and forgotten by
// either writer fails.
func TestPerRequestEveryFieldRoundTrips(t *testing.T) {
	rows := make([]RequestRow, 3)
	for i := range rows {
		tracetest.Fill(&rows[i], 100*i)
		if z := tracetest.Zero(&rows[i]); len(z) > 0 {
			t.Fatalf("Fill left fields zero: %v", z)
		}
	}
	dir := t.TempDir()
	pq, cs := filepath.Join(dir, "r.parquet"), filepath.Join(dir, "r.csv")
	if err := writeRowsParquet(pq, len(rows), func(i int) RequestRow { return rows[i] }); err != nil {
		t.Fatal(err)
	}
	if err := writeRowsCSV(cs, len(rows), func(i int) RequestRow { return rows[i] }); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPerRequest(pq)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("parquet:\n got %+v\nwant %+v", got, rows)
	}
	f, err := os.Open(cs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lines[0], csvHeader()) || len(lines) != len(rows)+1 {
		t.Fatalf("csv header %v, %d lines", lines[0], len(lines))
	}
	for i, line := range lines[1:] {
		var r RequestRow
		v := reflect.ValueOf(&r).Elem()
		for j, cell := range line {
			fv := v.Field(j)
			var err error
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(cell)
			case reflect.Bool:
				var b bool
				b, err = strconv.ParseBool(cell)
				fv.SetBool(b)
			case reflect.Int32, reflect.Int64:
				var n int64
				n, err = strconv.ParseInt(cell, 10, 64)
				fv.SetInt(n)
			case reflect.Float64:
				var x float64
				x, err = strconv.ParseFloat(cell, 64)
				fv.SetFloat(x)
			default:
				t.Fatalf("column %s: kind %s not parsed", lines[0][j], fv.Kind())
			}
			if err != nil {
				t.Fatalf("row %d column %s: %v", i, lines[0][j], err)
			}
		}
		if r != rows[i] {
			t.Errorf("csv row %d:\n got %+v\nwant %+v", i, r, rows[i])
		}
	}
}

// A per-request file written before the endpoint columns reads with them
// zero, the rest intact.
func TestOlderPerRequestFileReads(t *testing.T) {
	rt := reflect.TypeFor[RequestRow]()
	newer := []string{"endpoint", "ttfo_ms", "answered", "reasoning_tokens", "items"}
	var fields []reflect.StructField
	for i := range rt.NumField() {
		if f := rt.Field(i); !slices.Contains(newer, f.Tag.Get("parquet")) {
			fields = append(fields, f)
		}
	}
	old := reflect.StructOf(fields)
	var want RequestRow
	tracetest.Fill(&want, 7)
	row := reflect.New(old)
	for i := range old.NumField() {
		row.Elem().Field(i).Set(reflect.ValueOf(want).FieldByName(old.Field(i).Name))
	}
	want.Endpoint, want.TTFOms, want.Answered, want.ReasoningTokens, want.Items = "", 0, false, 0, 0

	p := filepath.Join(t.TempDir(), "old.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(f, parquet.SchemaOf(row.Interface()),
		parquet.KeyValueMetadata(trace.MetaFormat, RequestsFormat.Name),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, "1"))
	if err := w.Write(row.Interface()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := ReadPerRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("old file:\n got %+v\nwant %+v", got, want)
	}
}
