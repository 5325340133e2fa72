package trace

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeMedia stores items in a new media file at path and returns what Put
// returned for each.
func writeMedia(t *testing.T, path string, items [][]byte) []Media {
	t.Helper()
	w, err := NewMediaWriter(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []Media
	for i, data := range items {
		m, err := w.Put(Media{Kind: MediaImage, Format: "png", Width: int32(i + 1), Height: 2, Seed: 9}, data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMediaStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := MediaPath(filepath.Join(dir, "t.parquet"))
	if !strings.HasSuffix(path, "t.parquet.media") {
		t.Fatalf("MediaPath = %s", path)
	}
	// Items of 6 MiB cross row groups (a group is flushed past 16 MiB); the
	// third is the first again and must be stored once.
	a, b, c := randomBytes(1, 6<<20), randomBytes(2, 6<<20), []byte("small")
	d, e := randomBytes(3, 6<<20), randomBytes(4, 1000)
	items := [][]byte{a, b, bytes.Clone(a), c, d, e}
	ms := writeMedia(t, path, items)
	for i, m := range ms {
		if m.Hash != MediaHash(items[i]) || m.Bytes != int64(len(items[i])) || m.Seed != 0 || m.Width != int32(i+1) || m.Kind != MediaImage {
			t.Fatalf("item %d: Put returned %+v", i, m)
		}
	}
	if ms[0].Hash != ms[2].Hash {
		t.Fatal("equal items got different hashes")
	}
	if _, err := os.Stat(filepath.Join(dir, ".t.parquet.media.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}

	s, err := OpenMediaFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 5 || s.Meta.Items != 5 {
		t.Fatalf("%d items indexed, meta says %d: want 5 (the duplicate stored once)", s.Len(), s.Meta.Items)
	}
	want := int64(len(a) + len(b) + len(c) + len(d) + len(e))
	if s.Bytes() != want || s.Meta.Bytes != want {
		t.Fatalf("bytes %d, meta %d, want %d", s.Bytes(), s.Meta.Bytes, want)
	}
	if k := s.Kinds()[MediaImage]; k.Items != 5 || k.Bytes != want {
		t.Fatalf("kinds: %+v", s.Kinds())
	}
	if s.pf.NumRows() != 5 || len(s.pf.RowGroups()) < 2 {
		t.Fatalf("%d rows in %d row groups: want 5 in more than one", s.pf.NumRows(), len(s.pf.RowGroups()))
	}
	// Loads in any order, concurrently, give the stored bytes back.
	var wg sync.WaitGroup
	for i := len(items) - 1; i >= 0; i-- {
		wg.Go(func() {
			got, err := s.Load(ms[i].Hash)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, items[i]) {
				t.Errorf("item %d: loaded %d bytes that differ from the %d stored", i, len(got), len(items[i]))
			}
		})
	}
	wg.Wait()
	missing := MediaHash([]byte("not stored"))
	if n, ok := s.Has(missing); ok || n != 0 {
		t.Fatal("Has reports an item never stored")
	}
	if _, err := s.Load(missing); !errors.Is(err, ErrMediaMissing) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("loading a missing hash: %v", err)
	}

	// Never replaced without replace; replaced with it.
	if _, err := NewMediaWriter(path, false); !errors.Is(err, os.ErrExist) {
		t.Fatalf("existing media file: %v", err)
	}
	w, err := NewMediaWriter(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Put(Media{Kind: MediaAudio, Format: "wav"}, e); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenMediaFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Len() != 1 || s2.Kinds()[MediaAudio].Items != 1 {
		t.Fatalf("replaced file: %d items, kinds %+v", s2.Len(), s2.Kinds())
	}
}

func TestMediaWriterEmptyWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.parquet.media")
	w, err := NewMediaWriter(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Put(Media{Kind: MediaImage, Format: "png"}, nil); err == nil || !strings.Contains(err.Error(), "no bytes") {
		t.Fatalf("empty item: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
		t.Fatalf("a writer of no items left %v", ents)
	}
}

func TestMediaStoreCorrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.parquet.media")
	// Items larger than a page (256 KiB), so each has pages of its own.
	item := randomBytes(7, 300<<10)
	other := randomBytes(8, 300<<10)
	ms := writeMedia(t, path, [][]byte{other, item})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, item)
	if at < 0 {
		t.Fatal("the item's bytes are not stored as they are")
	}
	raw[at+100] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenMediaFile(path)
	if err != nil {
		t.Fatal(err) // the index is intact: only the item's bytes changed
	}
	defer s.Close()
	_, err = s.Load(ms[1].Hash)
	if err == nil || !strings.Contains(err.Error(), ms[1].Hash) || !strings.Contains(err.Error(), path) {
		t.Fatalf("loading a damaged item: %v, want an error naming the file and hash", err)
	}
	if !errors.Is(err, ErrMediaDamaged) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("loading a damaged item: %v, want it said damaged", err)
	}
	if got, err := s.Load(ms[0].Hash); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("an intact item beside the damaged one: %v", err)
	}
}

func TestMediaStoreRefusesAbsurdSizes(t *testing.T) {
	dir := t.TempDir()
	// A row claiming more than an item may have, written past the writer's
	// checks: the reader refuses it before loading anything.
	path := filepath.Join(dir, "big.media")
	w, err := CreateParquet[MediaItem](path, MediaFormat)
	if err != nil {
		t.Fatal(err)
	}
	h := MediaHash([]byte("x"))
	if err := w.Write(MediaItem{Hash: h, Kind: MediaImage, Format: "png", Bytes: MaxMediaItemBytes + 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMediaFile(path); err == nil || !strings.Contains(err.Error(), "row 0") || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("an item claiming %d bytes: %v", MaxMediaItemBytes+1, err)
	}

	// Bytes that are not those of their hash (a page checksum cannot
	// catch a file written so).
	path = filepath.Join(dir, "wrong.media")
	w, err = CreateParquet[MediaItem](path, MediaFormat)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(MediaItem{Hash: h, Kind: MediaImage, Format: "png", Bytes: 1, Data: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenMediaFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(h)
	s.Close()
	if !errors.Is(err, ErrMediaDamaged) || !strings.Contains(err.Error(), "hash to "+MediaHash([]byte("y"))) {
		t.Fatalf("bytes of another hash: %v", err)
	}

	// A hash that is not one.
	path = filepath.Join(dir, "badhash.media")
	w, err = CreateParquet[MediaItem](path, MediaFormat)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(MediaItem{Hash: "ABC", Kind: MediaImage, Format: "png", Bytes: 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMediaFile(path); err == nil || !strings.Contains(err.Error(), `"ABC"`) {
		t.Fatalf("a bad hash: %v", err)
	}

	// Another tracekit file is not a media file.
	if err := WriteTrace(filepath.Join(dir, "t.parquet"), TraceMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMediaFile(filepath.Join(dir, "t.parquet")); !errors.Is(err, ErrWrongFormat) {
		t.Fatalf("a trace opened as a media file: %v", err)
	}
}
