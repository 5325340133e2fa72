package main

import (
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

func TestSpliceSoakReplacesOnlyItsPart(t *testing.T) {
	doc := "# benchmarks\n\n## a\n\nrows\n"
	one := spliceSoak(doc, "## soak\n\nfirst\n")
	if !strings.HasPrefix(one, doc) || !strings.Contains(one, "first") {
		t.Fatalf("first splice: %q", one)
	}
	two := spliceSoak(one+"\n## after\n", "## soak\n\nsecond\n")
	if strings.Contains(two, "first") || !strings.Contains(two, "second") || !strings.Contains(two, "## after") || !strings.HasPrefix(two, doc) {
		t.Fatalf("second splice: %q", two)
	}
	if k := keptSoak(two); !strings.HasPrefix(k, soakBegin) || !strings.HasSuffix(k, soakEnd) || !strings.Contains(k, "second") {
		t.Fatalf("kept: %q", k)
	}
	if keptSoak(doc) != "" {
		t.Fatal("a file without a soak part kept something")
	}
}

// An error the mock did not inject is a false error; a request the mock saw
// twice or that the recording lacks is counted.
func TestJoinSoak(t *testing.T) {
	log := []mock.LogEntry{{RequestID: "a"}, {RequestID: "b", Fault: "status=503"}, {RequestID: "c"}, {RequestID: "c"}, {RequestID: "d"},
		{RequestID: "mock-probe"}, {RequestID: "x-0-0", Fault: "reset"}, {RequestID: "x-0-1"}}
	recs := []trace.Record{
		{RequestID: "a"},
		{RequestID: "b", ErrorKind: trace.ErrHTTPStatus},
		{RequestID: "c", ErrorKind: trace.ErrConnect, ErrorMessage: "invented"},
		{RequestID: "e", ErrorKind: trace.ErrCanceled},
		{RequestID: "f", Attempt: 1},
		{RequestID: "x-0-1", Attempt: 1},
	}
	j := joinSoak(recs, log)
	if j.faults != 2 || j.falseErrors != 1 || j.duplicates != 1 || j.missing != 1 || j.retried != 2 || len(j.examples) != 2 {
		t.Fatalf("%+v", j)
	}
}
