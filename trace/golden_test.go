package trace

import (
	"errors"
	"io"
	"testing"
)

// Files written by schema version 1 (see testdata/README.md) must stay
// readable with their meaning intact by every later tracekit.
func TestSchemaV1TraceStaysReadable(t *testing.T) {
	rows, meta := readAllTurns(t, "../testdata/trace-v1.parquet")
	if len(rows) != 8 || meta.Source != "synthetic" || meta.Seed != 3 || meta.Tokenizer == "" {
		t.Fatalf("got %d rows, meta %+v", len(rows), meta)
	}
	convs := map[string]int32{}
	for i, r := range rows {
		if i > 0 && r.StartOffsetNs < rows[i-1].StartOffsetNs {
			t.Errorf("row %d: not sorted by start offset", i)
		}
		if r.Turn != convs[r.ConversationID] {
			t.Errorf("row %d: conversation %s turn %d, want %d (turns contiguous, in order)", i, r.ConversationID, r.Turn, convs[r.ConversationID])
		}
		convs[r.ConversationID]++
		if len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Role != "user" || r.InputTokens <= 0 || r.OutputTokens < 5 || r.OutputTokens > 10 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if len(convs) != 3 {
		t.Errorf("%d conversations, want 3", len(convs))
	}
}

func TestSchemaV1RecordingStaysReadable(t *testing.T) {
	r, err := OpenRecording("../testdata/recording-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Meta.StartMonoNs == 0 || r.Meta.StartWallNs == 0 || len(r.Meta.Targets) != 1 {
		t.Fatalf("run meta %+v", r.Meta)
	}
	recs := make([]Record, 16)
	n, err := r.Read(recs)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if n != 8 {
		t.Fatalf("%d records, want 8", n)
	}
	for _, rec := range recs[:n] {
		if rec.ErrorKind != ErrNone || rec.Status != 200 || len(rec.EventNs) == 0 || len(rec.EventNs) != len(rec.EventTokens) {
			t.Errorf("record %s: %+v", rec.RequestID, rec)
			continue
		}
		if !(rec.IntendedNs <= rec.SlotNs && rec.SlotNs <= rec.SentNs && rec.SentNs < rec.EventNs[0] && rec.EventNs[len(rec.EventNs)-1] <= rec.DoneNs) {
			t.Errorf("record %s: times out of order: intended %d slot %d sent %d first %d done %d", rec.RequestID, rec.IntendedNs, rec.SlotNs, rec.SentNs, rec.EventNs[0], rec.DoneNs)
		}
	}
}

// inspect's summaries of the schema-1 files, checked against the rows.
func TestSummariesOfGoldenFiles(t *testing.T) {
	rs, err := SummarizeRecording("../testdata/recording-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := ReadRecords("../testdata/recording-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	var events, tokens int64
	first, last := recs[0].SentNs, recs[0].DoneNs
	for _, r := range recs {
		events += int64(len(r.EventNs))
		for _, k := range r.EventTokens {
			tokens += int64(k)
		}
		first, last = min(first, r.SentNs), max(last, r.DoneNs)
	}
	if rs.Rows != 8 || rs.OK != 8 || len(rs.Errors) != 0 || rs.Conversations != 3 || rs.Events != events || rs.Tokens != tokens || rs.SpanNs != last-first {
		t.Errorf("recording summary %+v; rows say %d events, %d tokens, span %d", rs, events, tokens, last-first)
	}
	ts, err := SummarizeTrace("../testdata/trace-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if ts.Rows != 8 || ts.Conversations != 3 || ts.TurnsPerConv.Min != 2 || ts.TurnsPerConv.Max != 3 || ts.WithReference != 8 {
		t.Errorf("trace summary %+v", ts)
	}
}
