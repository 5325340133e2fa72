package analyze

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// Hand-computed session metrics of two graph sessions read back from a
// recording file: a fan-out and join (all ok) and a session whose branch
// failed with a descendant not sent.
func TestSessionMetrics(t *testing.T) {
	g := func(conv, id string, turn int32, parents []int32, intended, sent, done int64, first int64, kind trace.ErrorKind) trace.Record {
		status := int32(200)
		var ev [][2]int64
		if kind == "" {
			ev = [][2]int64{{first, 1}, {done - 1, 2}}
		} else {
			status = 0
		}
		r := rec(id, turn, intended, sent, sent, done, status, kind, 10, 10, 3, -1, ev...)
		r.ConversationID, r.Parents = conv, parents
		return r
	}
	recs := []trace.Record{
		// a: 0 (server 10) -> {1 (20), 2 (40)} -> 3 (5): critical 10+40+5 = 55 of 75; makespan 0..106.
		g("a", "a0", 0, nil, 0, 0, 10, 2, ""),
		g("a", "a1", 1, []int32{0}, 11, 11, 31, 13, ""),
		g("a", "a2", 2, []int32{0}, 11, 11, 51, 14, ""),
		g("a", "a3", 3, []int32{1, 2}, 100, 101, 106, 103, ""),
		// b: root branches 0 (ok, 30) and 1 (failed at once), 2 <- 1 not sent.
		g("b", "b0", 0, []int32{trace.RootParent}, 200, 200, 230, 205, ""),
		g("b", "b1", 1, []int32{trace.RootParent}, 200, 200, 200, 0, trace.ErrHTTPStatus),
		g("b", "b2", 2, []int32{1}, 200, 200, 200, 0, trace.ErrParentFailed),
	}
	recs[1].ToolCalls, recs[3].ToolCalls, recs[3].ToolCallMismatch = 2, 1, true
	p := writeRecording(t, t.TempDir(), "g.parquet", trace.RunMeta{}, recs)
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Sessions
	if st == nil {
		t.Fatal("no session metrics for a graph recording")
	}
	if st.Sessions != 2 || st.Succeeded != 1 || st.SuccessRate != 0.5 || st.Requests != 7 || st.ParentFailed != 1 || st.ToolCalls != 3 || st.ToolCallMismatches != 1 {
		t.Fatalf("counts %+v", st)
	}
	// makespans 106 and 30; critical paths 55 and 30; server 75 and 30.
	if st.MakespanMs.Max != 106 || st.MakespanMs.Mean != 68 || st.CriticalPathMs.Max != 55 || st.CriticalPathMs.Mean != 42.5 ||
		st.ServerTimeMs.Mean != 52.5 || st.CriticalOverServer != (55.0/75+1)/2 {
		t.Fatalf("times %+v", st)
	}
	// depth 0: a0, b0, b1 (TTFT 2, 5 ok); 1: a1, a2, b2 (2, 3); 2: a3 (2).
	want := []DepthStats{{0, 3, 2, 3.5, 3.5, 4.7}, {1, 3, 2, 2.5, 2.5, 2.9}, {2, 1, 1, 2, 2, 2}}
	if len(st.ByDepth) != 3 {
		t.Fatalf("depths %+v", st.ByDepth)
	}
	for i, d := range st.ByDepth {
		w := want[i]
		if d.Depth != w.Depth || d.Requests != w.Requests || d.Completed != w.Completed || !close9(d.MeanTTFTms, w.MeanTTFTms) || !close9(d.P90TTFTms, w.P90TTFTms) {
			t.Errorf("depth %d: %+v, want %+v", i, d, w)
		}
	}
	var text, page, js bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	s.WriteHTML(&page)
	s.WriteJSON(&js, false)
	if !strings.Contains(text.String(), "Sessions (dependency graphs)") || !strings.Contains(text.String(), "Tool-call mismatches:                    1") {
		t.Errorf("text report lacks the session section:\n%s", text.String())
	}
	if !strings.Contains(page.String(), `<h2 id="sessions">`) {
		t.Error("HTML report lacks the session section")
	}
	var out struct {
		Tracekit struct {
			Sessions *SessionStats `json:"sessions"`
		} `json:"tracekit"`
		Completed int `json:"completed"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil || out.Tracekit.Sessions == nil || out.Tracekit.Sessions.Sessions != 2 || out.Completed != 5 {
		t.Errorf("JSON: %v %+v", err, out)
	}
	// A chat recording has no session section.
	chat, err := Files([]string{writeRecording(t, t.TempDir(), "c.parquet", trace.RunMeta{}, handRecords())}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	chat.WriteText(&text)
	if chat.Sessions != nil || strings.Contains(text.String(), "Sessions (") {
		t.Error("a chat recording got a session section")
	}
}

func close9(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A wait-only edge is on the critical path (the waiter could not start
// before the turn it waits for ended) but adds no depth (no history).
func TestSessionCriticalPathCountsAfter(t *testing.T) {
	g := func(id string, turn int32, parents, after []int32, sent, done int64) trace.Record {
		r := rec(id, turn, sent, sent, sent, done, 200, "", 10, 10, 3, -1, [2]int64{sent + 1, 1}, [2]int64{done - 1, 2})
		r.ConversationID, r.Parents, r.After = "c", parents, after
		return r
	}
	// c0 (server 10) -> c2 (5), c1 a root branch (50) that c2 waits for:
	// critical 50+5 = 55, not 10+5; c2 at depth 1.
	recs := []trace.Record{g("c0", 0, nil, nil, 0, 10), g("c1", 1, []int32{trace.RootParent}, nil, 0, 50),
		g("c2", 2, []int32{0}, []int32{1}, 55, 60)}
	s, err := Files([]string{writeRecording(t, t.TempDir(), "a.parquet", trace.RunMeta{}, recs)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Sessions
	if st == nil || st.CriticalPathMs.Max != 55 || st.ServerTimeMs.Max != 65 || st.MakespanMs.Max != 60 {
		t.Fatalf("sessions %+v", st)
	}
	if len(st.ByDepth) != 2 || st.ByDepth[0].Requests != 2 || st.ByDepth[1].Requests != 1 {
		t.Errorf("depths %+v: want c0, c1 at 0 and c2 at 1", st.ByDepth)
	}
	// Without the edge the same stamps give the parent chain only.
	recs[2].After = nil
	s, _ = Files([]string{writeRecording(t, t.TempDir(), "b.parquet", trace.RunMeta{}, recs)}, Options{})
	if s.Sessions.CriticalPathMs.Max != 50 {
		t.Errorf("without After: critical %v, want 50 (c1 alone)", s.Sessions.CriticalPathMs.Max)
	}
}

// Graph nodes recorded parent_failed were never sent: the vLLM block
// (completed, failed, num_prompts, the per-request lists) counts the
// requests sent, as vLLM's does, and the text, HTML and JSON reports give
// the not-sent ones on their own.
func TestNotSentOutsideVLLMBlock(t *testing.T) {
	mk := func(id string, turn int32, parents []int32, kind trace.ErrorKind) trace.Record {
		status := int32(200)
		ev := [][2]int64{{3, 1}, {9, 2}}
		if kind != "" {
			status, ev = 0, nil
			if kind == trace.ErrHTTPStatus {
				status = 400
			}
		}
		r := rec(id, turn, 0, 0, 1, 10, status, kind, 10, 10, 3, -1, ev...)
		r.ConversationID, r.Parents = "g", parents
		return r
	}
	// 0 ok; 1 <- 0 refused (sent, failed); 2, 3 <- 1 not sent; 4 <- 0 ok.
	recs := []trace.Record{mk("g0", 0, nil, ""), mk("g1", 1, []int32{0}, trace.ErrHTTPStatus),
		mk("g2", 2, []int32{1}, trace.ErrParentFailed), mk("g3", 3, []int32{2}, trace.ErrParentFailed), mk("g4", 4, []int32{0}, "")}
	s, err := Files([]string{writeRecording(t, t.TempDir(), "n.parquet", trace.RunMeta{}, recs)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 5 || s.Completed != 2 || s.Failed != 1 || s.NotSent != 2 {
		t.Fatalf("requests %d completed %d failed %d not sent %d; want 5, 2, 1, 2", s.Requests, s.Completed, s.Failed, s.NotSent)
	}
	var js, text, page bytes.Buffer
	s.WriteJSON(&js, true)
	var out struct {
		NumPrompts int       `json:"num_prompts"`
		Completed  int       `json:"completed"`
		Failed     int       `json:"failed"`
		Latencies  []float64 `json:"latencies"`
		Errors     []string  `json:"errors"`
		Tracekit   struct {
			NotSent int `json:"not_sent"`
		} `json:"tracekit"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.NumPrompts != 3 || out.Completed != 2 || out.Failed != 1 || len(out.Latencies) != 3 || len(out.Errors) != 3 || out.Tracekit.NotSent != 2 {
		t.Errorf("JSON: %+v; want 3 prompts sent (2 completed, 1 failed, 3 list entries) and 2 not sent", out)
	}
	s.WriteText(&text)
	block, _, _ := strings.Cut(text.String(), " tracekit ")
	if !strings.Contains(block, "Failed requests:                         1 ") ||
		!strings.Contains(text.String(), "Not sent:                                2 (parent_failed") {
		t.Errorf("text report:\n%s", text.String())
	}
	s.WriteHTML(&page)
	if !strings.Contains(page.String(), "2 / 3") || !strings.Contains(page.String(), "not sent (parent_failed)") {
		t.Error("HTML report: want 2 of 3 sent completed and the not-sent tile")
	}
}
