package analyze

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// The SSE reader's record of a body that ended without data: [DONE] is
// what EndedCleanly recognises (the two live in different packages; this
// keeps them in step).
func TestEndedCleanlyMatchesTheStreamReader(t *testing.T) {
	s := record.NewStream(nil)
	body := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
	n := int64(0)
	if err := s.ReadBody(strings.NewReader(body), make([]byte, 4096), func() int64 { n++; return n }); err != nil {
		t.Fatal(err)
	}
	var rec trace.Record
	s.Fill(&rec)
	rec.ErrorKind, rec.ErrorMessage = s.Verdict()
	rec.Status = 200
	if rec.ErrorKind != trace.ErrStreamTruncated || !EndedCleanly(&rec) || len(rec.EventNs) != 2 {
		t.Fatalf("a body without [DONE] recorded as %q %q, clean %v", rec.ErrorKind, rec.ErrorMessage, EndedCleanly(&rec))
	}
	broken := rec
	broken.ErrorMessage = "reading the stream after 2 events: unexpected EOF"
	if EndedCleanly(&broken) {
		t.Error("a read error counted as a clean end")
	}
}

// vLLM's rule (the default) counts a stream that ended cleanly without
// [DONE] as completed, keeps it flagged, and --success strict fails it; a
// broken connection fails under both.
func TestSuccessRules(t *testing.T) {
	ok := rec("ok", 0, 0, 0, 0, 300, 200, "", 10, 10, 2, -1, [2]int64{100, 1}, [2]int64{200, 1})
	noDone := rec("nodone", 0, 0, 0, 0, 300, 200, trace.ErrStreamTruncated, 10, 10, -1, -1, [2]int64{120, 1}, [2]int64{220, 1})
	noDone.ErrorMessage = "the body ended after 2 events without data: [DONE]"
	broken := rec("broken", 0, 0, 0, 0, 300, 200, trace.ErrStreamTruncated, 10, 10, -1, -1, [2]int64{150, 1})
	broken.ErrorMessage = "reading the stream after 1 events: unexpected EOF"
	created := rec("201", 0, 0, 0, 0, 300, 201, "", 10, 10, 1, -1, [2]int64{150, 1})
	recs := []trace.Record{ok, noDone, broken, created}
	p := writeRecording(t, t.TempDir(), "s.parquet", trace.RunMeta{}, recs)

	v, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Completed != 2 || v.Failed != 2 || v.Truncated != 2 || v.TruncatedCompleted != 1 || v.TotalOutput != 4 {
		t.Errorf("vllm: completed %d failed %d truncated %d/%d output %d", v.Completed, v.Failed, v.TruncatedCompleted, v.Truncated, v.TotalOutput)
	}
	if q := v.Reqs[1]; !q.Success || !q.Truncated || q.ErrorKind != string(trace.ErrStreamTruncated) || q.E2ELNs != 220*ms {
		t.Errorf("vllm: no-[DONE] request %+v", q)
	}
	if q := v.Reqs[3]; q.Success || q.ErrorKind != string(trace.ErrHTTPStatus) {
		t.Errorf("vllm: a 201 must fail as vLLM's client fails it: %+v", q)
	}
	var text bytes.Buffer
	v.WriteText(&text)
	if !strings.Contains(text.String(), "Streams ended without [DONE]:            2 (1 counted as completed") {
		t.Errorf("text lacks the truncation line:\n%s", text.String())
	}

	s, err := Files([]string{p}, Options{Success: SuccessStrict})
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != 2 || s.Failed != 2 || s.TruncatedCompleted != 0 || s.Reqs[1].Success || !s.Reqs[3].Success {
		t.Errorf("strict: completed %d failed %d truncated completed %d", s.Completed, s.Failed, s.TruncatedCompleted)
	}
	if len(s.Errors) != 1 || s.Errors[0].Kind != string(trace.ErrStreamTruncated) || s.Errors[0].Count != 2 {
		t.Errorf("strict errors %+v", s.Errors)
	}
}
