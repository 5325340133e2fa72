package synth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// burstOld is the first release's layout; burstNew adds Session ID and
// Elapsed time, with its columns in another order (read by name).
const burstOld = `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,217,634,API log
118.5,GPT-4,300,20,320,Conversation log
`

const burstNew = `Session ID,Timestamp,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type
7,10,2.5,ChatGPT,100,50,150,Conversation log
9,11,1,ChatGPT,80,0,80,Conversation log
7,20,3,ChatGPT,200,40,240,Conversation log
,21,1,ChatGPT,60,6,66,API log
7,30,1,ChatGPT,290,10,300,Conversation log
`

func burstImport(t *testing.T, body string, o BurstGPTOptions) ([]Conversation, *BurstGPT) {
	t.Helper()
	o.Path = writeFile(t, "burst.csv", body)
	o.Corpus = importCorpus(t)
	b, err := NewBurstGPT(o)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := b.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return convs, b
}

func TestBurstGPTFiltersAndFailed(t *testing.T) {
	cases := []struct {
		name string
		b    BurstGPTOptions
		ids  []string
		at   []int64
	}{
		{"default drops failed", BurstGPTOptions{}, []string{"burstgpt-l000000002", "burstgpt-l000000004", "burstgpt-l000000005"}, []int64{5e9, 118e9, 118.5e9}},
		{"keep", BurstGPTOptions{Failed: FailedKeep}, []string{"burstgpt-l000000002", "burstgpt-l000000003", "burstgpt-l000000004", "burstgpt-l000000005"}, []int64{5e9, 45e9, 118e9, 118.5e9}},
		{"flag", BurstGPTOptions{Failed: FailedFlag}, []string{"burstgpt-l000000002", "burstgpt-l000000003-failed", "burstgpt-l000000004", "burstgpt-l000000005"}, []int64{5e9, 45e9, 118e9, 118.5e9}},
		{"model", BurstGPTOptions{FilterModel: "gpt-4"}, []string{"burstgpt-l000000004", "burstgpt-l000000005"}, []int64{118e9, 118.5e9}},
		{"log type", BurstGPTOptions{LogType: "conversation", FilterModel: "GPT-4"}, []string{"burstgpt-l000000005"}, []int64{118.5e9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			convs, b := burstImport(t, burstOld, c.b)
			rows, meta := writeAndReadBack(t, b, convs, b.Report())
			var ids []string
			var at []int64
			for _, r := range rows {
				ids = append(ids, r.ConversationID)
				at = append(at, r.ArrivalOffsetNs)
				if r.OutputTokens < 1 {
					t.Errorf("%s: output tokens %d", r.ConversationID, r.OutputTokens)
				}
			}
			if !slices.Equal(ids, c.ids) || !slices.Equal(at, c.at) {
				t.Fatalf("ids %v at %v, want %v %v", ids, at, c.ids, c.at)
			}
			if meta.Options["failed_rows"] != "1" || meta.Options["rows"] != "4" {
				t.Fatalf("options %v", meta.Options)
			}
		})
	}
}

func TestBurstGPTSessions(t *testing.T) {
	convs, _ := burstImport(t, burstNew, BurstGPTOptions{Failed: FailedFlag})
	if len(convs) != 3 {
		t.Fatalf("%d conversations, want sessions 7 and 9 (flagged) and one unkeyed row", len(convs))
	}
	s := convs[0]
	if s[0].ConversationID != "burstgpt-s7" || len(s) != 3 || convs[1][0].ConversationID != "burstgpt-s9-failed" || convs[2][0].ConversationID != "burstgpt-l000000005" {
		t.Fatalf("conversations %s(%d) %s %s", s[0].ConversationID, len(s), convs[1][0].ConversationID, convs[2][0].ConversationID)
	}
	// Turns by time; arrival = timestamp; think = gap - previous elapsed;
	// new tokens = prompt - previous prompt - previous output.
	wantAt := []int64{10e9, 20e9, 30e9}
	wantThink := []int64{0, 7.5e9, 7e9}
	wantIn := []int32{100, 50, 50}
	for k, tr := range s {
		if tr.Turn != int32(k) || tr.ArrivalOffsetNs != wantAt[k] || tr.StartOffsetNs != 10e9 || tr.ThinkTimeNs != wantThink[k] || tr.InputTokens != wantIn[k] {
			t.Errorf("turn %d: at %d start %d think %d in %d", k, tr.ArrivalOffsetNs, tr.StartOffsetNs, tr.ThinkTimeNs, tr.InputTokens)
		}
	}
}

func TestBurstGPTBadInput(t *testing.T) {
	for _, c := range []struct{ row, want string }{
		{"x,ChatGPT,4,5,9,API log", `line 3: field "Timestamp"`},
		{"6,ChatGPT,four,5,9,API log", `line 3: field "Request tokens"`},
		{"6,ChatGPT,4,-5,9,API log", `line 3: field "Response tokens"`},
		{"6,ChatGPT,4,5", `line 3: 4 fields, the header has 6`},
	} {
		p := writeFile(t, "b.csv", strings.Join(strings.Split(burstOld, "\n")[:2], "\n")+"\n"+c.row+"\n")
		_, err := (&BurstGPT{Opts: BurstGPTOptions{ImportOptions: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}}).Conversations(context.Background())
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), p+" "+c.want) {
			t.Errorf("row %q: error %v, want %q", c.row, err, c.want)
		}
		b := &BurstGPT{Opts: BurstGPTOptions{ImportOptions: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, SkipBad: true}}}
		if convs, err := b.Conversations(context.Background()); err != nil || len(convs) != 1 || b.Stats().BadRows != 1 {
			t.Errorf("skip-bad %q: %d convs, %+v, %v", c.row, len(convs), b.Stats(), err)
		}
	}
	p := writeFile(t, "b.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\n")
	if _, err := (&BurstGPT{Opts: BurstGPTOptions{ImportOptions: ImportOptions{Path: p}, FilterModel: "GPT-4"}}).Conversations(context.Background()); err == nil || !strings.Contains(err.Error(), "Model column") {
		t.Errorf("model filter without a Model column: %v", err)
	}
	if _, err := (&BurstGPT{Opts: BurstGPTOptions{ImportOptions: ImportOptions{Path: p}, Failed: "maybe"}}).Conversations(context.Background()); err == nil {
		t.Error("failed mode maybe accepted")
	}
}
