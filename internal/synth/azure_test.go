package synth

import (
	"context"
	"encoding/csv"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAzure2023Quirks(t *testing.T) {
	// CRLF, no final newline, 7 fraction digits: offsets exact to 100 ns;
	// zero tokens become 1 (a request needs a prompt and max_tokens >= 1).
	body := "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" +
		"2023-11-16 18:15:46.6805900,374,44\r\n" +
		"2023-11-16 18:15:46.6805901,396,109\r\n" +
		"2023-11-16 18:15:50.9951690,879,55\r\n" +
		"2023-11-16 18:16:00.0000000,0,0"
	p := writeFile(t, "AzureLLMInferenceTrace_conv.csv", body)
	a := &Azure{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}
	convs, err := a.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, meta := writeAndReadBack(t, a, convs, a.Report())
	wantAt := []int64{0, 100, 4314579000, 13319410000}
	wantIn := []int32{374, 396, 879, 1}
	wantOut := []int32{44, 109, 55, 1}
	if len(rows) != 4 || meta.Source != "azure" {
		t.Fatalf("%d rows, source %q", len(rows), meta.Source)
	}
	for i, r := range rows {
		if r.ArrivalOffsetNs != wantAt[i] || r.InputTokens != wantIn[i] || r.OutputTokens != wantOut[i] || len(r.PrefixHashes) != 0 {
			t.Errorf("row %d: at %d in %d out %d hashes %v", i, r.ArrivalOffsetNs, r.InputTokens, r.OutputTokens, r.PrefixHashes)
		}
		if n := importCorpus(t).Tokenizer().Count(r.Messages[0].Content); n != int(r.InputTokens) {
			t.Errorf("row %d: %d tokens of content", i, n)
		}
	}
	if rows[0].Messages[0].Content == rows[1].Messages[0].Content[:len(rows[0].Messages[0].Content)] {
		t.Error("two Azure requests share a prompt prefix; the trace has no hashes, prompts must be private")
	}
}

func TestAzure2024Quirks(t *testing.T) {
	// "+00:00" zone, rows without a fraction, LF with a final newline.
	body := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2024-05-10 00:00:00+00:00,1024,12\n" +
		"2024-05-10 00:00:00.010419+00:00,2048,8\n" +
		"2024-05-10 00:00:01+00:00,100,3\n" +
		"2024-05-10 00:00:01.5+00:00,100,3\n"
	p := writeFile(t, "AzureLLMInferenceTrace_code_1week.csv", body)
	a := &Azure{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}
	convs, err := a.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := arrivals(convs), []int64{0, 10419000, 1e9, 1.5e9}; !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	// A non-UTC zone is honoured: +02:00 is two hours earlier in UTC.
	ns, err := parseWallNs("2024-05-10 02:00:00+02:00")
	utc, _ := parseWallNs("2024-05-10 00:00:00+00:00")
	if err != nil || ns != utc {
		t.Fatalf("zone offset: %d vs %d, %v", ns, utc, err)
	}
}

func TestAzureBadInput(t *testing.T) {
	head := "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n"
	cases := []struct{ row, want string }{
		{"2023-11-16 18:15:47.1,abc,44", `line 3: field "ContextTokens"`},
		{"2023-11-16 18:15:47.1,12,-4", `line 3: field "GeneratedTokens"`},
		{"2023-13-16 18:15:47.1,12,4", `line 3: field "TIMESTAMP"`},
		{"2023-11-16 18:15:47.1+0000,12,4", `line 3: field "TIMESTAMP"`},
		{"2023-11-16 18:15:47.1,12", `line 3: 2 fields, the header has 3`},
		{`"2023-11-16 18:15:47.1,12,4`, `line 3:`},
	}
	for _, c := range cases {
		p := writeFile(t, "bad.csv", head+c.row+"\r\n2023-11-16 18:15:48.0000000,5,5")
		_, err := (&Azure{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}).Conversations(context.Background())
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), p+" "+c.want) {
			t.Errorf("row %q: error %v, want %q", c.row, err, c.want)
			continue
		}
		a := &Azure{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, SkipBad: true}}
		convs, err := a.Conversations(context.Background())
		// A broken quote swallows the rest of the file into one bad row.
		if err != nil || len(convs) < 1 || a.Stats().BadRows != 1 {
			t.Errorf("skip-bad %q: %d convs, stats %+v, %v", c.row, len(convs), a.Stats(), err)
		}
	}
	p := writeFile(t, "nohead.csv", "time,in,out\n1,2,3\n")
	if _, err := (&Azure{Opts: ImportOptions{Path: p}}).Conversations(context.Background()); err == nil || !strings.Contains(err.Error(), `missing column "TIMESTAMP"`) {
		t.Errorf("wrong header: %v", err)
	}
}

const sharedAzure = "../../../shared/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"

// TestAzureSharedData imports the published 2023 conversation trace and
// compares count, span and inter-arrival percentiles with the file's own,
// parsed here with time.Parse.
func TestAzureSharedData(t *testing.T) {
	f, err := os.Open(sharedAzure)
	if err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, r := range recs[1:] {
		ts, err := time.Parse("2006-01-02 15:04:05.0000000", r[0])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ts.UnixNano())
	}
	slices.Sort(want)
	t0 := want[0]
	for i := range want {
		want[i] -= t0
	}
	a := &Azure{Opts: ImportOptions{Path: sharedAzure, Corpus: importCorpus(t), PromptText: true, MaxInputTokens: 8}}
	convs, err := a.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := arrivals(convs)
	if len(got) != 19366 || !slices.Equal(got, want) {
		t.Fatalf("%d arrivals, file has %d (equal: %v)", len(got), len(want), slices.Equal(got, want))
	}
	span := time.Duration(got[len(got)-1])
	if span < 55*time.Minute || span > 60*time.Minute || a.Stats().SourceSpanNs != int64(span) {
		t.Fatalf("span %v", span)
	}
	if gp, wp := gapPercentiles(got), gapPercentiles(want); gp != wp {
		t.Fatalf("inter-arrival percentiles %v, file %v", gp, wp)
	}
	t.Logf("%d requests over %v, inter-arrival p50/p90/p99 %v", len(got), span, gapPercentiles(got))
}
