package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tracekit/tracekit/trace/tracetest"
)

func sampleTurns(n int) []Turn {
	rows := make([]Turn, n)
	for i := range rows {
		rows[i] = Turn{
			ConversationID:  fmt.Sprintf("c%05d", i/3),
			Turn:            int32(i % 3),
			StartOffsetNs:   int64(i/3) * 1e9,
			ArrivalOffsetNs: int64(i/3)*1e9 + int64(i%3)*5e8,
			ThinkTimeNs:     int64(i%3) * 5e8,
			Messages:        []Message{{Role: "user", Content: fmt.Sprintf("question %d ✓", i), Tokens: 4}},
			ReferenceAnswer: fmt.Sprintf("answer %d", i),
			InputTokens:     4,
			OutputTokens:    int32(100 + i),
			PrefixHashes:    []int64{1, 2, int64(i)},
			Model:           "m",
		}
		if i%3 == 0 {
			rows[i].Messages = append([]Message{{Role: "system", Content: "be brief", Tokens: 2}}, rows[i].Messages...)
			rows[i].PrefixHashes = nil
		}
	}
	return rows
}

func readAllTurns(t *testing.T, path string) ([]Turn, TraceMeta) {
	t.Helper()
	rows, meta, err := ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows, meta
}

// More rows than RowGroupRows so that several row groups are written and read.
func TestTraceRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.parquet")
	meta := TraceMeta{TracekitVersion: Version, Command: "tracekit synth", Seed: 7, Tokenizer: "o200k_base", Source: "synthetic", CreatedAt: "2026-01-01T00:00:00Z", Options: map[string]string{"turns": "3"}}
	want := sampleTurns(RowGroupRows*2 + 17)
	w, err := NewTraceWriter(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(want[:10]...); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(want[10:]...); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != int64(len(want)) {
		t.Fatalf("Rows() = %d, want %d", w.Rows(), len(want))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, gotMeta := readAllTurns(t, path)
	if len(got) != len(want) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(want))
	}
	for i := range want {
		// parquet reads an empty list back as nil or empty: compare the
		// JSON forms, where both are omitted.
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if !reflect.DeepEqual(gotMeta, meta) {
		t.Fatalf("meta: got %+v want %+v", gotMeta, meta)
	}
}

func TestRecordRoundTripWithLateMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.parquet")
	w, err := NewRecordWriter(path, RunMeta{TracekitVersion: Version, StartWallNs: 1, StartMonoNs: 2, Targets: []string{"http://x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{RequestID: "a", ConversationID: "c", Turn: 0, IntendedNs: 10, SlotNs: 11, SentNs: 12, HeadersNs: 20, DoneNs: 99, Status: 200,
			PromptTokens: 5, CompletionTokens: 3, CachedTokens: -1, EventNs: []int64{12 + 30e3, 12 + 40e3, 12 + 50e3}, EventTokens: []int32{0, 2, 1}, TokensExact: true, Parents: []int32{}, After: []int32{}},
		{RequestID: "b", ConversationID: "c", Turn: 1, Status: 503, ErrorKind: ErrHTTPStatus, ErrorMessage: "overloaded", PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1},
	}
	if err := w.Write(want...); err != nil {
		t.Fatal(err)
	}
	health := &Health{DispatchLagP99Ns: 1234, Warnings: []string{"w"}}
	if err := w.SetRunMeta(RunMeta{TracekitVersion: Version, StartWallNs: 1, StartMonoNs: 2, Health: health}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumRows() != 2 {
		t.Fatalf("NumRows = %d", r.NumRows())
	}
	got := make([]Record, 4)
	n, err := r.Read(got)
	if n != 2 || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if !reflect.DeepEqual(got[0], want[0]) {
		t.Fatalf("row 0: got %+v want %+v", got[0], want[0])
	}
	if got[1].ErrorKind != ErrHTTPStatus || len(got[1].EventNs) != 0 {
		t.Fatalf("row 1: got %+v", got[1])
	}
	if r.Meta.Health == nil || r.Meta.Health.DispatchLagP99Ns != 1234 {
		t.Fatalf("health not read back: %+v", r.Meta.Health)
	}
}

func writeTrace(t *testing.T, path string) {
	t.Helper()
	w, err := NewTraceWriter(path, TraceMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(sampleTurns(3)...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "trace.parquet")
	writeTrace(t, tracePath)

	empty := filepath.Join(dir, "empty.parquet")
	os.WriteFile(empty, nil, 0o644)
	text := filepath.Join(dir, "text.parquet")
	os.WriteFile(text, []byte("conversation_id,turn\n"), 0o644)
	data, _ := os.ReadFile(tracePath)
	truncated := filepath.Join(dir, "truncated.parquet")
	os.WriteFile(truncated, data[:len(data)/2], 0o644)

	// A Parquet file written by someone else: no tracekit keys.
	foreign := filepath.Join(dir, "foreign.parquet")
	if err := parquet.WriteFile(foreign, []struct{ X int64 }{{1}}); err != nil {
		t.Fatal(err)
	}
	// A trace from a future tracekit.
	newer := filepath.Join(dir, "newer.parquet")
	f, _ := os.Create(newer)
	pw := parquet.NewGenericWriter[Turn](f, parquet.KeyValueMetadata(MetaFormat, FormatTrace), parquet.KeyValueMetadata(MetaSchemaVersion, "99"))
	pw.Write(sampleTurns(1))
	pw.Close()
	f.Close()

	cases := []struct {
		name, path string
		open       func(string) error
		is         error
		mention    string
	}{
		{"missing", filepath.Join(dir, "nope.parquet"), openTrace, os.ErrNotExist, "nope.parquet"},
		{"empty", empty, openTrace, nil, "not a readable Parquet file"},
		{"text", text, openTrace, nil, "not a readable Parquet file"},
		{"truncated", truncated, openTrace, nil, "truncated"},
		{"foreign parquet", foreign, openTrace, ErrWrongFormat, "no tracekit format key"},
		{"trace as recording", tracePath, openRecording, ErrWrongFormat, "expected a tracekit.recording file, found tracekit.trace"},
		{"newer version", newer, openTrace, ErrNewerVersion, "schema version 99"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.open(c.path)
			if err == nil {
				t.Fatal("opened a bad file without error")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), filepath.Base(c.path)) {
				t.Errorf("error %q should name the file and mention %q", err, c.mention)
			}
		})
	}
}

func openTrace(p string) error {
	r, err := OpenTrace(p)
	if err == nil {
		r.Close()
	}
	return err
}

func openRecording(p string) error {
	r, err := OpenRecording(p)
	if err == nil {
		r.Close()
	}
	return err
}

// The schema must use plain types notebooks read without surprises: int64
// nanoseconds without a timestamp logical type, UTF-8 strings, LIST lists
// (the recording's as RecordWriter writes it).
func TestSchemaIsNotebookFriendly(t *testing.T) {
	for _, s := range []*parquet.Schema{parquet.SchemaOf(Turn{}), parquet.SchemaOf(recordRow{}, hideEventNs)} {
		str := s.String()
		if strings.Contains(str, "TIMESTAMP") || strings.Contains(str, "timestamp(") {
			t.Errorf("schema uses a timestamp type:\n%s", str)
		}
		for _, want := range []string{"(LIST)", "(STRING)"} {
			if !strings.Contains(str, want) {
				t.Errorf("schema lacks %s:\n%s", want, str)
			}
		}
	}
}

// TraceReader.Read checks each row once: bad tools JSON or a parent that
// is not an earlier turn ends the read naming the row.
func TestTraceReaderChecksRows(t *testing.T) {
	for _, c := range []struct {
		turn Turn
		want string
	}{
		{Turn{ConversationID: "a", Turn: 1, Tools: `[{"type":"function"`}, "trace row 1: conversation \"a\" turn 1: tools: expected a JSON array"},
		{Turn{ConversationID: "a", Turn: 1, ToolChoice: `required`}, "tool_choice: expected a JSON string or object"},
		{Turn{ConversationID: "a", Turn: 1, Parents: []int32{1}}, "parent 1: expected an earlier turn (0..0)"},
		{Turn{ConversationID: "a", Turn: 1, Parents: []int32{-2}}, "parent -2"},
		{Turn{ConversationID: "a", Turn: 1, After: []int32{1}}, "trace row 1: conversation \"a\" turn 1: after 1: expected an earlier turn (0..0)"},
		{Turn{ConversationID: "a", Turn: 1, After: []int32{RootParent}}, "after -1: expected an earlier turn"},
	} {
		p := filepath.Join(t.TempDir(), "t.parquet")
		ok := Turn{ConversationID: "a", Turn: 0, Tools: `[{"type":"function","function":{"name":"f"}}]`, ToolChoice: `"required"`, Parents: []int32{RootParent}}
		if err := WriteTrace(p, TraceMeta{}, []Turn{ok, c.turn}); err != nil {
			t.Fatal(err)
		}
		r, err := OpenTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]Turn, 4)
		n, err := r.Read(rows)
		r.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalidTurn) || n != 1 {
			t.Errorf("%+v: read %d rows, error %v; want 1 row and %q", c.turn, n, err, c.want)
		}
	}
}

// A trace or recording is stamped with the oldest schema version that
// holds its rows: 2 without wait-only edges (a version-2 tracekit replays
// it exactly), 3 with one (a version-2 tracekit refuses it rather than
// send without waiting), 4 with an API beyond chat and completions (a
// version-3 tracekit would send it as a chat), and all read back here
// with After and Endpoint intact.
func TestVersionStampFollowsAfter(t *testing.T) {
	dir := t.TempDir()
	version := func(p string) string {
		v, _ := tracetest.OpenParquet(t, p).Lookup(MetaSchemaVersion)
		return v
	}
	chat := []Turn{{ConversationID: "a", Turn: 0}, {ConversationID: "a", Turn: 1, Parents: []int32{RootParent}}}
	wait := slices.Clone(chat)
	wait[1].After = []int32{0}
	chatNamed := slices.Clone(chat)
	chatNamed[1].Endpoint = EndpointChat
	messages := slices.Clone(wait)
	messages[1].Endpoint = EndpointMessages
	media := slices.Clone(messages)
	media[1].Messages = []Message{{Role: "user", Content: "what is this?", Media: []Media{
		{Kind: MediaImage, Format: "jpeg", Width: 640, Height: 480, Seed: 7}, {Kind: MediaAudio, Format: "wav", DurationMs: 1500, Seed: 8}}}}
	for _, c := range []struct {
		name  string
		turns []Turn
		want  string
	}{{"chat", chat, "2"}, {"after", wait, "3"}, {"chat-named", chatNamed, "2"}, {"messages", messages, "4"}, {"media", media, "5"}} {
		p := filepath.Join(dir, c.name+".trace.parquet")
		w, err := NewTraceWriter(p, TraceMeta{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tu := range c.turns { // one row per Write: the stamp follows a later row
			if err := w.Write(tu); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if v := version(p); v != c.want {
			t.Errorf("%s trace stamped version %s, want %s", c.name, v, c.want)
		}
		got, _, err := ReadTurns(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[1].After, c.turns[1].After) || got[1].Endpoint != c.turns[1].Endpoint {
			t.Errorf("%s trace: After, Endpoint read back %v %q, wrote %v %q", c.name, got[1].After, got[1].Endpoint, c.turns[1].After, c.turns[1].Endpoint)
		}
		if wm, gm := c.turns[1].Messages, got[1].Messages; len(wm) > 0 && (len(gm) != 1 || !slices.Equal(gm[0].Media, wm[0].Media)) {
			t.Errorf("%s trace: messages read back %+v, wrote %+v", c.name, gm, wm)
		}

		p = filepath.Join(dir, c.name+".rec.parquet")
		rw, err := NewRecordWriter(p, RunMeta{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tu := range c.turns {
			r := Record{RequestID: fmt.Sprint(tu.Turn), Turn: tu.Turn, Parents: tu.Parents, After: tu.After, Endpoint: tu.Endpoint}
			for _, m := range tu.Messages {
				r.MediaItems += int32(len(m.Media))
			}
			if err := rw.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := rw.Close(); err != nil {
			t.Fatal(err)
		}
		if v := version(p); v != c.want {
			t.Errorf("%s recording stamped version %s, want %s", c.name, v, c.want)
		}
		recs, _, err := ReadRecords(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(recs[1].After, c.turns[1].After) || recs[1].Endpoint != c.turns[1].Endpoint {
			t.Errorf("%s recording: After read back %v, wrote %v", c.name, recs[1].After, c.turns[1].After)
		}
	}
}

// A chat recording whose answers start after a role-only chunk (an event
// without tokens) stays at version 3 or below; one whose answers start
// after reasoning events with tokens needs version 4.
func TestRecordVersionFollowsReasoning(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  Record
		want bool
	}{
		{"role chunk first", Record{Endpoint: EndpointChat, EventNs: []int64{1, 2, 3}, EventTokens: []int32{0, 1, 1}, FirstAnswerEvent: 1, ReasoningTokens: -1}, false},
		{"reasoning events first", Record{Endpoint: EndpointChat, EventNs: []int64{1, 2, 3}, EventTokens: []int32{1, 1, 1}, FirstAnswerEvent: 2, ReasoningTokens: -1}, true},
		{"reasoning reported", Record{Endpoint: EndpointChat, ReasoningTokens: 5}, true},
		{"messages", Record{Endpoint: EndpointMessages}, true},
	} {
		c.rec.EventNs = nil // any event needs the gap layout's version; this is about the token columns
		if got := c.rec.schemaVersion() >= 4; got != c.want {
			t.Errorf("%s: needs version 4 %v, want %v", c.name, got, c.want)
		}
	}
}
