package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/tracekit/tracekit/trace"
	"github.com/tracekit/tracekit/trace/tracetest"
)

// midPageByte is a byte inside the body of the largest page of the file's
// first row group (its CRC covers it), from the offset index.
func midPageByte(t *testing.T, path string) int64 {
	t.Helper()
	pf := tracetest.OpenParquet(t, path)
	var at, size int64
	for _, cc := range pf.RowGroups()[0].ColumnChunks() {
		oi, err := cc.(*parquet.FileColumnChunk).OffsetIndex()
		if err != nil {
			t.Fatal(err)
		}
		for i := range oi.NumPages() {
			if s := oi.CompressedPageSize(i); s > size {
				at, size = oi.Offset(i)+s-s/4, s // the header is at the start
			}
		}
	}
	return at
}

// noOutput fails when anything of a recording at out exists.
func noOutput(t *testing.T, out string) {
	t.Helper()
	for _, p := range []string{out, out + ".journal", out + ".partial", out + ".lock"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
}

// A trace damaged on disk (bytes flipped in its header, in a column chunk,
// in its footer's length or magic) is bad input: exit 2 naming the file, before any output
// is created, so the next run needs no --force.
func TestReplayDamagedTrace(t *testing.T) {
	srv := processMock(t, time.Millisecond)
	good := processTrace(t, "d", 40, 2, time.Millisecond, 0, 3)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "rec.parquet")
	for _, c := range []struct {
		name string
		at   int64
	}{
		{"header", 1},
		{"column chunk", midPageByte(t, good)},
		{"footer length", int64(len(b)) - 7},
		{"footer magic", int64(len(b)) - 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]byte(nil), b...)
			bad[c.at] ^= 0xff
			path := filepath.Join(t.TempDir(), "bad.parquet")
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runCLI(t, "replay", path, "--target", srv.URL(), "-o", out, "--progress", "none", "--no-analyze")
			if code != ExitUsage || !strings.Contains(stderr, path) {
				t.Errorf("byte %d flipped: exit %d, want 2 naming %s; stderr %q", c.at, code, path, stderr)
			}
			noOutput(t, out)
		})
	}
	if _, stderr, code := runCLI(t, "replay", good, "--target", srv.URL(), "-o", out, "--progress", "none", "--no-analyze"); code != ExitOK {
		t.Fatalf("the intact trace after the damaged ones: exit %d: %s", code, stderr)
	}
}

// A trace whose damage is only met midway (here an invalid row, which
// only reading it finds) is still bad input, exit 2: what was sent before
// is kept as a complete recording, and the message says so; met before
// anything was sent, no recording is left at all.
func TestReplayTraceBadMidway(t *testing.T) {
	srv := processMock(t, time.Millisecond)
	write := func(badRow int) string {
		var turns []trace.Turn
		for i := range 600 {
			tt := trace.Turn{ConversationID: fmt.Sprintf("m%03d", i), StartOffsetNs: int64(i) * int64(time.Millisecond),
				InputTokens: 5, OutputTokens: 2, Messages: []trace.Message{{Role: "user", Content: "hello", Tokens: 5}}}
			if i == badRow {
				tt.Tools = "not json"
			}
			turns = append(turns, tt)
		}
		path := filepath.Join(t.TempDir(), "trace.parquet")
		if err := trace.WriteTrace(path, trace.TraceMeta{Tokenizer: "o200k_base"}, turns); err != nil {
			t.Fatal(err)
		}
		return path
	}

	out := filepath.Join(t.TempDir(), "rec.parquet")
	_, stderr, code := runCLI(t, "replay", write(0), "--target", srv.URL(), "-o", out, "--progress", "none", "--no-analyze")
	if code != ExitUsage || !strings.Contains(stderr, "no recording was written") {
		t.Errorf("invalid first row: exit %d, stderr %q; want 2 saying no recording was written", code, stderr)
	}
	noOutput(t, out)

	_, stderr, code = runCLI(t, "replay", write(590), "--target", srv.URL(), "-o", out, "--progress", "none", "--no-analyze")
	recs, _, err := trace.ReadRecords(out)
	if code != ExitUsage || err != nil || len(recs) == 0 || !strings.Contains(stderr, fmt.Sprintf("holds the %d requests sent before it", len(recs))) {
		t.Errorf("invalid row 590: exit %d, %d records (%v), stderr %q; want 2 and a complete recording of what was sent, said so", code, len(recs), err, stderr)
	}
	for _, p := range []string{out + ".journal", out + ".partial", out + ".lock"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
}
