package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// A journal written before Record.NonStreaming (v1: the record payload ends
// after TokensExact) still decodes, and a v2 journal keeps the field.
func TestJournalV1StillReads(t *testing.T) {
	rec := Record{RequestID: "r1", ConversationID: "c", Turn: 2, SentNs: 5, EventNs: []int64{7, 9}, EventTokens: []int32{0, 3}, TokensExact: true}
	v2 := AppendRecordPayload(nil, &rec)
	// v1's payload: the same bytes without the trailing NonStreaming varint
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
	}{{journalMagicV1, v1, false}, {JournalMagic, v2, false}} {
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
