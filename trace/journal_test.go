package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// A journal written before Record.NonStreaming (v1: the record payload ends
// after TokensExact) still decodes, and a v2 journal keeps the field.
func TestJournalV1StillReads(t *testing.T) {
	rec := Record{RequestID: "r1", ConversationID: "c", Turn: 2, SentNs: 5, EventNs: []int64{7, 9}, EventTokens: []int32{0, 3}, TokensExact: true}
	v8 := AppendRecordPayload(nil, &rec)
	// v7's payload: v8's without the zero AudioMs varint.
	v7 := v8[:len(v8)-1]
	// v6's payload: v7's without the nine zero media varints by kind.
	v6 := v7[:len(v7)-9]
	// v5's payload: v6's without the four zero media varints and the empty
	// model's length.
	v5 := v6[:len(v6)-5]
	// v4's payload: v5's without the empty Endpoint and three zero
	// varints (a byte each).
	v4 := v5[:len(v5)-4]
	// v3's payload: v4's without the empty After list's byte; v2's: v3's
	// without the graph fields' three trailing bytes (no parents, 0 tool
	// calls, no mismatch).
	v3 := v4[:len(v4)-1]
	v2 := v3[:len(v3)-3]
	// v1's payload: v2's without the trailing NonStreaming varint
	// (0 is one byte) before the event lists.
	tail := binary.AppendUvarint(nil, uint64(len(rec.EventNs)))
	i := bytes.LastIndex(v2, append([]byte{0}, tail...))
	if i < 0 {
		t.Fatal("cannot find the NonStreaming varint in the payload")
	}
	v1 := append(append([]byte(nil), v2[:i]...), v2[i+1:]...)
	for _, c := range []struct {
		magic   string
		payload []byte
		nonStr  bool
	}{{journalMagicV1, v1, false}, {journalMagicV2, v2, false}, {journalMagicV3, v3, false}, {journalMagicV4, v4, false}, {journalMagicV5, v5, false}, {journalMagicV6, v6, false}, {journalMagicV7, v7, false}, {JournalMagic, v8, false}} {
		j := AppendJournalFrame([]byte(c.magic), c.payload)
		jr, err := NewJournalReader(bytes.NewReader(j), "test", JournalMagic)
		if err != nil {
			t.Fatal(err)
		}
		var got Record
		if err := jr.Next(&got); err != nil {
			t.Fatalf("%q: %v", c.magic, err)
		}
		if got.RequestID != "r1" || got.Turn != 2 || !got.TokensExact || len(got.EventNs) != 2 || got.EventNs[1] != 9 || got.NonStreaming != c.nonStr {
			t.Fatalf("%q: decoded %+v", c.magic, got)
		}
		if err := jr.Next(&got); err != io.EOF {
			t.Fatalf("%q: after the only record: %v", c.magic, err)
		}
	}
	rec.NonStreaming = true
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), AppendRecordPayload(nil, &rec))), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || !got.NonStreaming {
		t.Fatalf("v2 NonStreaming lost: %v %+v", err, got)
	}
}

// A v3 journal carries the graph fields; a v2 one reads them empty.
func TestJournalGraphFields(t *testing.T) {
	rec := Record{RequestID: "r1", Parents: []int32{RootParent, 3}, ToolCalls: 2, ToolCallMismatch: true}
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), AppendRecordPayload(nil, &rec))), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || len(got.Parents) != 2 || got.Parents[0] != RootParent || got.Parents[1] != 3 || got.ToolCalls != 2 || !got.ToolCallMismatch {
		t.Fatalf("v3 graph fields lost: %v %+v", err, got)
	}
	p := AppendRecordPayload(nil, &Record{RequestID: "r2"})
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV2), p[:len(p)-13-9-1])), "test", JournalMagic)
	got = Record{Parents: []int32{9}, ToolCalls: 9}
	if err := jr.Next(&got); err != nil || got.Parents != nil || got.ToolCalls != 0 || got.RequestID != "r2" {
		t.Fatalf("v2 journal: %v %+v", err, got)
	}
}

// A v4 journal carries Record.After; a v3 one (a build before it) reads it
// empty and still decodes its graph fields.
func TestJournalAfter(t *testing.T) {
	rec := Record{RequestID: "r1", Parents: []int32{RootParent}, After: []int32{0, 4}, ToolCalls: 1}
	p := AppendRecordPayload(nil, &rec)
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), p)), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || len(got.After) != 2 || got.After[0] != 0 || got.After[1] != 4 || got.ToolCalls != 1 {
		t.Fatalf("v4 After lost: %v %+v", err, got)
	}
	noAfter := AppendRecordPayload(nil, &Record{RequestID: "r2", Parents: []int32{RootParent}, ToolCalls: 1})
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV3), noAfter[:len(noAfter)-10-9-1])), "test", JournalMagic)
	got = Record{After: []int32{9}}
	if err := jr.Next(&got); err != nil || got.After != nil || got.RequestID != "r2" || len(got.Parents) != 1 || got.ToolCalls != 1 {
		t.Fatalf("v3 journal: %v %+v", err, got)
	}
}

// A v5 journal carries what APIs beyond chat report; a v4 one (a build
// before them) reads them empty and still decodes After.
func TestJournalEndpointFields(t *testing.T) {
	rec := Record{RequestID: "r1", After: []int32{2}, Endpoint: EndpointMessages, ReasoningTokens: 7, FirstAnswerEvent: 3, Items: 0}
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), AppendRecordPayload(nil, &rec))), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || got.Endpoint != EndpointMessages || got.ReasoningTokens != 7 || got.FirstAnswerEvent != 3 || len(got.After) != 1 {
		t.Fatalf("v5 fields lost: %v %+v", err, got)
	}
	p := AppendRecordPayload(nil, &Record{RequestID: "r2", After: []int32{1}})
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV4), p[:len(p)-9-9-1])), "test", JournalMagic)
	got = Record{Endpoint: "x", Items: 9}
	if err := jr.Next(&got); err != nil || got.Endpoint != "" || got.Items != 0 || len(got.After) != 1 || got.RequestID != "r2" {
		t.Fatalf("v4 journal: %v %+v", err, got)
	}
}

// A v6 journal carries what a request with media sent; a v5 one reads
// them as 0 and still decodes the API fields.
func TestJournalMediaFields(t *testing.T) {
	rec := Record{RequestID: "r1", Endpoint: EndpointChat, Items: 2, WriteStartNs: 11, RequestBytes: 4 << 20, MediaItems: 2, MediaBytes: 3 << 20, Model: "lora-a"}
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), AppendRecordPayload(nil, &rec))), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || got.WriteStartNs != 11 || got.RequestBytes != 4<<20 || got.MediaItems != 2 || got.MediaBytes != 3<<20 || got.Model != "lora-a" {
		t.Fatalf("v6 fields lost: %v %+v", err, got)
	}
	p := AppendRecordPayload(nil, &Record{RequestID: "r2", Items: 3})
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV5), p[:len(p)-5-9-1])), "test", JournalMagic)
	got = Record{MediaItems: 9, RequestBytes: 9}
	if err := jr.Next(&got); err != nil || got.MediaItems != 0 || got.RequestBytes != 0 || got.Items != 3 || got.RequestID != "r2" {
		t.Fatalf("v5 journal: %v %+v", err, got)
	}
}

// A v8 journal carries the media columns by kind and the audio's
// length; a v7 one reads the length as 0, a v6 one the columns by kind,
// and both still decode the media totals and the model.
func TestJournalMediaKindFields(t *testing.T) {
	rec := Record{RequestID: "r1", MediaItems: 3, MediaBytes: 30, Model: "m", ImageItems: 2, ImageBytes: 20, AudioItems: 1, AudioBytes: 10,
		ImageTokens: 512, AudioTokens: 13, AudioMs: 2750}
	jr, _ := NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(JournalMagic), AppendRecordPayload(nil, &rec))), "test", JournalMagic)
	var got Record
	if err := jr.Next(&got); err != nil || got.ImageItems != 2 || got.ImageBytes != 20 || got.AudioItems != 1 || got.AudioBytes != 10 ||
		got.ImageTokens != 512 || got.AudioTokens != 13 || got.VideoItems != 0 || got.MediaItems != 3 || got.AudioMs != 2750 {
		t.Fatalf("v8 fields lost: %v %+v", err, got)
	}
	v8 := AppendRecordPayload(nil, &rec)
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV7), v8[:len(v8)-2])), "test", JournalMagic)
	got = Record{AudioMs: 9}
	if err := jr.Next(&got); err != nil || got.AudioMs != 0 || got.AudioTokens != 13 || got.AudioBytes != 10 {
		t.Fatalf("v7 journal: %v %+v", err, got)
	}
	p := AppendRecordPayload(nil, &Record{RequestID: "r2", MediaItems: 1, Model: "m"})
	jr, _ = NewJournalReader(bytes.NewReader(AppendJournalFrame([]byte(journalMagicV6), p[:len(p)-10])), "test", JournalMagic)
	got = Record{ImageItems: 9, AudioTokens: 9}
	if err := jr.Next(&got); err != nil || got.ImageItems != 0 || got.AudioTokens != 0 || got.MediaItems != 1 || got.Model != "m" {
		t.Fatalf("v6 journal: %v %+v", err, got)
	}
}

// A run killed before its journal's first line reached the disk leaves an
// empty file or part of that line: a journal torn at byte 0, holding
// nothing, not a file of another kind.
func TestJournalTornInItsMagic(t *testing.T) {
	for _, n := range []int{0, 1, len(JournalMagic) - 1} {
		jr, err := NewJournalReader(bytes.NewReader([]byte(JournalMagic[:n])), "test", JournalMagic)
		if err != nil {
			t.Fatalf("%d bytes of the magic line: %v", n, err)
		}
		var rec Record
		if err := jr.Next(&rec); err != io.EOF || !jr.Torn || jr.TornOffset != 0 {
			t.Errorf("%d bytes: Next %v, torn %v at %d; want EOF, torn at 0", n, err, jr.Torn, jr.TornOffset)
		}
	}
	if _, err := NewJournalReader(bytes.NewReader([]byte("tracekit.jX")), "test", JournalMagic); err == nil {
		t.Error("a file that is no journal's start was taken for a torn journal")
	}
}

// A trace journal's media frames hand each item back with its bytes, in
// order among the turns; a frame whose bytes are not the item it names is
// an error naming its byte offset; one cut short by a crash ends the
// journal there (torn), the turns before it kept.
func TestTraceJournalMedia(t *testing.T) {
	a, b := []byte("first item's bytes"), bytes.Repeat([]byte{7}, 70000)
	ma := Media{Kind: MediaImage, Format: "png", Width: 4, Height: 3, Hash: MediaHash(a), Bytes: int64(len(a))}
	mb := Media{Kind: MediaAudio, Format: "wav", DurationMs: 10, Hash: MediaHash(b), Bytes: int64(len(b))}
	var j bytes.Buffer
	j.WriteString(TraceJournalMagic)
	turn := func(id string) {
		p, err := AppendJSONPayload(nil, FrameTurn, Turn{ConversationID: id})
		if err != nil {
			t.Fatal(err)
		}
		j.Write(AppendJournalFrame(nil, p))
	}
	if err := WriteMediaFrame(&j, ma, a); err != nil {
		t.Fatal(err)
	}
	turn("c1")
	if err := WriteMediaFrame(&j, mb, b); err != nil {
		t.Fatal(err)
	}
	turn("c2")
	read := func(data []byte) ([]Turn, []string, *JournalReader, error) {
		jr, err := NewJournalReader(bytes.NewReader(data), "j", TraceJournalMagic)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		turns, _, err := jr.ReadTraceJournal(func(m Media, data []byte) error {
			got = append(got, m.Kind+" "+m.Hash+" "+string(rune('0'+len(data)%10)))
			if MediaHash(data) != m.Hash {
				t.Errorf("item %s handed back with other bytes", m.Hash)
			}
			return nil
		})
		return turns, got, jr, err
	}
	turns, items, jr, err := read(j.Bytes())
	if err != nil || len(turns) != 2 || len(items) != 2 || jr.Torn ||
		items[0] != "image "+ma.Hash+" 8" || items[1] != "audio "+mb.Hash+" 0" {
		t.Fatalf("turns %d, items %q, torn %v, %v", len(turns), items, jr.Torn, err)
	}

	// Cut inside the second item: the first item and turn are kept.
	cut := bytes.Index(j.Bytes(), b[:100]) + 1000
	turns, items, jr, err = read(j.Bytes()[:cut])
	if err != nil || len(turns) != 1 || len(items) != 1 || !jr.Torn {
		t.Fatalf("torn journal: turns %d, items %d, torn %v, %v", len(turns), len(items), jr.Torn, err)
	}

	// An item whose bytes are not what it names.
	var bad bytes.Buffer
	bad.WriteString(TraceJournalMagic)
	if err := WriteMediaFrame(&bad, ma, b); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := read(bad.Bytes()); err == nil || !strings.Contains(err.Error(), "j: byte 26: media frame: 70000 bytes that are not the item") {
		t.Fatalf("a media frame of other bytes: %v", err)
	}
}

// A journal read with no magic to expect (SniffJournal's "" for a file
// whose first line is not yet written, as a reader racing its writer
// gets) is an error naming the file, not a panic.
func TestJournalReaderWithoutMagic(t *testing.T) {
	for _, content := range []string{"", JournalMagic[:3], JournalMagic} {
		_, err := NewJournalReader(strings.NewReader(content), "j.journal", "")
		if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), "j.journal") {
			t.Errorf("content %q, magic \"\": %v, want ErrNotJournal naming the file", content, err)
		}
	}
}
