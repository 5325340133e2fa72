package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// realItem is a real image: bytes made by internal/media, stored by hash.
type realItem struct {
	m    trace.Media // as the trace holds it
	data []byte
}

// writeRealTrace writes convs of one turn each, conversation i carrying
// items[i%len(items)] (so items repeat across conversations), and stores
// the items in the trace's media file. It returns the trace's path.
func writeRealTrace(t *testing.T, n int, items []realItem) string {
	t.Helper()
	var convs [][]trace.Turn
	for i := range n {
		c := conv(fmt.Sprintf("r%02d", i), 1, time.Duration(i)*time.Millisecond, 0, 2)
		c[0].Messages[len(c[0].Messages)-1].Media = []trace.Media{items[i%len(items)].m}
		convs = append(convs, c)
	}
	path := writeTrace(t, convs...)
	w, err := trace.NewMediaWriter(trace.MediaPath(path), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if _, err := w.Put(it.m, it.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// realItems makes count real images of different sizes and formats.
func realItems(t *testing.T, count int) []realItem {
	t.Helper()
	var out []realItem
	for i := range count {
		v := trace.Media{Kind: trace.MediaImage, Format: []string{"png", "jpeg"}[i%2], Width: int32(40 + 30*i), Height: int32(30 + 20*i), Seed: int64(i)}
		b, err := media.Make(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		m := v
		m.Seed, m.Hash, m.Bytes = 0, trace.MediaHash(b), int64(len(b))
		out = append(out, realItem{m, b})
	}
	return out
}

// A trace of real items is replayed with their stored bytes: the server
// decodes each at its true size and charges its media tokens, whether the
// request carries a data URI or the URL replay serves it at.
func TestRealMediaReplayed(t *testing.T) {
	items := realItems(t, 3)
	path := writeRealTrace(t, 7, items)
	byHash := map[string]realItem{}
	for _, it := range items {
		byHash[it.m.Hash] = it
	}
	turns, _, err := trace.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"", "http://127.0.0.1:0/media"} {
		t.Run("url="+base, func(t *testing.T) {
			srv := mocktest.Start(t, nil)
			r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true, MediaURLBase: base}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sink := &memSink{}
			res, err := r.Run(ctx, sink)
			if err != nil || res.Sent != 7 || res.Errors != 0 {
				t.Fatalf("%d sent, %d errors, %v", res.Sent, res.Errors, err)
			}
			if got := r.mat.items.Load(); got != 7 {
				t.Errorf("%d items loaded, want 7", got)
			}
			want := map[string]realItem{} // conversation: its item
			for _, tu := range turns {
				want[tu.ConversationID] = byHash[tu.Messages[len(tu.Messages)-1].Media[0].Hash]
			}
			convOf := map[string]string{} // request id: conversation
			for _, rec := range sink.Records() {
				convOf[rec.RequestID] = rec.ConversationID
				it := want[rec.ConversationID]
				if rec.ErrorKind != trace.ErrNone || rec.MediaItems != 1 || (base == "" && rec.MediaBytes != int64(len(it.data))) {
					t.Errorf("%s: %s %s; %d items of %d bytes, want 1 of %d", rec.RequestID, rec.ErrorKind, rec.ErrorMessage, rec.MediaItems, rec.MediaBytes, len(it.data))
				}
			}
			n := 0
			for _, e := range srv.Log() {
				it, ok := want[convOf[e.RequestID]]
				if !ok {
					continue // the probe before the run
				}
				n++
				info, err := media.Probe(it.data)
				if err != nil {
					t.Fatal(err)
				}
				tokens, err := media.Tokens(info)
				if err != nil {
					t.Fatal(err)
				}
				if info.Width != int(it.m.Width) || e.MediaItems != 1 || e.MediaBytes != int64(len(it.data)) || e.MediaTokens != int32(tokens) {
					t.Errorf("%s: the server saw %d items of %d bytes, %d tokens; want 1 of %d bytes (%dx%d), %d tokens",
						e.RequestID, e.MediaItems, e.MediaBytes, e.MediaTokens, len(it.data), info.Width, info.Height, tokens)
				}
			}
			if n != 7 {
				t.Errorf("the server logged %d of the trace's requests, want 7", n)
			}
			if base != "" && r.media.served.Load() != 7 {
				t.Errorf("the media server served %d items, want 7", r.media.served.Load())
			}
		})
	}
}

// A trace whose media file is missing, or lacks an item, is refused
// before the run, naming the trace, the conversation, turn and row, and
// the hash.
func TestRealMediaMissing(t *testing.T) {
	items := realItems(t, 2)
	path := writeRealTrace(t, 4, items[:1])
	// the last conversation's item is not stored
	turns, meta, err := trace.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	turns[3].Messages[len(turns[3].Messages)-1].Media = []trace.Media{items[1].m}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := trace.WriteTrace(path, meta, turns); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Trace: path, Targets: []string{"http://127.0.0.1:1"}, NoProbe: true, Model: "m"}, nil)
	for _, want := range []string{path, `conversation "r03" turn 0 (row 3)`, items[1].m.Hash, trace.MediaPath(path), "does not hold"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an item missing from the media file: %v; want it to name %s", err, want)
		}
	}

	if err := os.Remove(trace.MediaPath(path)); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Trace: path, Targets: []string{"http://127.0.0.1:1"}, NoProbe: true, Model: "m"}, nil)
	for _, want := range []string{path, `conversation "r00" turn 0 (row 0)`, items[0].m.Hash, trace.MediaPath(path), "no such file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("no media file: %v; want it to name %s", err, want)
		}
	}
}

// An item whose stored bytes do not match its hash fails the run where
// the look-ahead loads it, naming the conversation and the hash; nothing
// of it is sent.
func TestRealMediaDamaged(t *testing.T) {
	items := realItems(t, 1)
	path := writeRealTrace(t, 2, items)
	// rewrite the media file with other bytes under the item's hash
	mp := trace.MediaPath(path)
	os.Remove(mp)
	w, err := trace.CreateParquet[trace.MediaItem](mp, trace.MediaFormat)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), items[0].data...)
	bad[len(bad)/2] ^= 1
	if err := w.Write(trace.MediaItem{Hash: items[0].m.Hash, Kind: trace.MediaImage, Format: items[0].m.Format, Bytes: int64(len(bad)), Data: bad}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	srv := mocktest.Start(t, nil)
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.Run(ctx, &memSink{})
	if !errors.Is(err, trace.ErrMediaDamaged) || !strings.Contains(err.Error(), items[0].m.Hash) || !strings.Contains(err.Error(), `"r00"`) {
		t.Fatalf("a damaged item: %v", err)
	}
	if res.Sent != 0 {
		t.Errorf("%d requests sent with a damaged item", res.Sent)
	}
	for _, e := range srv.Log() {
		if e.MediaItems != 0 {
			t.Errorf("request %s reached the server with media", e.RequestID)
		}
	}
}
