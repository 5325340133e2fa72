package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// journalBytes is a recording journal holding n records.
func journalBytes(n int) []byte {
	payload, _ := trace.AppendRunMetaPayload(nil, trace.RunMeta{Command: "killed run"})
	j := trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	for i := range n {
		rec := trace.Record{RequestID: "r" + string(rune('a'+i)), Status: 200, EventNs: []int64{1, 2}, EventTokens: []int32{1, 1}}
		j = trace.AppendJournalFrame(j, trace.AppendRecordPayload(nil, &rec))
	}
	return j
}

// TestRecoverCLI: recover reports each file it rescued on stderr with its
// count, exits 2 on a missing file or one that is not a journal, and 1 when
// the journal breaks midway (keeping it, writing nothing).
func TestRecoverCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	os.WriteFile(good+".journal", journalBytes(3), 0o644)
	out, stderr, code := runCLI(t, "recover", good)
	if code != ExitOK || out != "" || !strings.Contains(stderr, "recovered 3 records from "+good+".journal into "+good) {
		t.Fatalf("good journal: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if recs, _, err := trace.ReadRecords(good); err != nil || len(recs) != 3 {
		t.Fatalf("recovered file: %d records, %v", len(recs), err)
	}

	notJournal := filepath.Join(dir, "notes.journal")
	os.WriteFile(notJournal, []byte("PAR1 something else entirely"), 0o644)
	if _, stderr, code := runCLI(t, "recover", notJournal); code != ExitUsage || !strings.Contains(stderr, notJournal) {
		t.Fatalf("not a journal: exit %d, stderr %q", code, stderr)
	}
	os.Remove(notJournal)
	missing := filepath.Join(dir, "missing.parquet")
	if _, stderr, code := runCLI(t, "recover", missing); code != ExitUsage || !strings.Contains(stderr, missing) {
		t.Fatalf("missing file: exit %d, stderr %q", code, stderr)
	}

	// Two good records, then an intact frame of an unknown kind: the
	// journal is not torn but wrong inside.
	broken := filepath.Join(dir, "broken.parquet")
	j := trace.AppendJournalFrame(journalBytes(2), []byte("Zgarbage"))
	os.WriteFile(broken+".journal", j, 0o644)
	if _, stderr, code := runCLI(t, "recover", broken+".journal"); code != ExitFailed || !strings.Contains(stderr, broken+".journal") {
		t.Fatalf("broken midway: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(broken + ".journal"); err != nil {
		t.Fatalf("journal removed after a failed recovery: %v", err)
	}
	if m, _ := filepath.Glob(broken + "*"); len(m) != 1 {
		t.Fatalf("files after a failed recovery: %v; want only the journal", m)
	}
}
