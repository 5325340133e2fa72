package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// The media file: the bytes of a trace's real media items (Media.Hash set),
// one row per distinct SHA-256, beside the trace (MediaPath). Virtual items
// have no row: replay makes their bytes.
const (
	FormatMedia        = "tracekit.media"
	MediaSchemaVersion = 1
	MetaMedia          = "tracekit.media_meta" // JSON of MediaMeta
)

// MediaFormat is the media file's FileFormat.
var MediaFormat = FileFormat{FormatMedia, MediaSchemaVersion}

// Bounds on a media file, so that a damaged or hostile file cannot make a
// reader allocate without limit. An item is at most MaxMediaItemBytes (an
// hour of 16 kHz 16-bit audio is 115 MB; a 4K PNG some tens of MB); a file
// is at most MaxMediaFileBytes in all. A writer refuses an item or a total
// beyond them; a reader refuses a file that claims more.
const (
	MaxMediaItemBytes = 128 << 20
	MaxMediaFileBytes = 64 << 30
)

// mediaGroupBytes bounds the item bytes a writer buffers before it flushes a
// row group (and so a writer's memory), whatever the items' count.
const mediaGroupBytes = 16 << 20

// MediaItem is one row of a media file: a real item's bytes under their
// SHA-256 (lower-case hex). Kind and Format are those of the first item
// stored with the hash. Data is stored uncompressed: images, video and
// most audio are compressed already.
type MediaItem struct {
	Hash   string `parquet:"hash" json:"hash"`
	Kind   string `parquet:"kind,dict" json:"kind"`
	Format string `parquet:"format,dict" json:"format"`
	Bytes  int64  `parquet:"bytes" json:"bytes"`
	Data   []byte `parquet:"data,plain,uncompressed" json:"-"`
}

// MediaMeta is the file-level description of a media file.
type MediaMeta struct {
	TracekitVersion string `json:"tracekit_version"`
	Items           int64  `json:"items"` // rows: distinct hashes
	Bytes           int64  `json:"bytes"` // the items' bytes in all
}

// MediaPath is the media file of a trace: "t.parquet" has "t.parquet.media".
func MediaPath(tracePath string) string { return tracePath + MediaFileSuffix }

// MediaTempPath is the temporary file a MediaWriter for the media file
// path writes until Close renames it into place.
func MediaTempPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
}

// MediaHash is the SHA-256 of data in lower-case hex: a real item's
// Media.Hash.
func MediaHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// MediaWriter stores real items' bytes in a media file, each distinct
// content once. Rows go to a temporary file in the target directory
// (bounded memory: a row group every mediaGroupBytes); Close renames it
// into place. Not safe for concurrent use.
type MediaWriter struct {
	w       *ParquetWriter[MediaItem]
	path    string
	tmp     string
	replace bool
	seen    map[string]struct{}
	bytes   int64 // stored so far
	group   int64 // buffered in the current row group
	done    bool
}

// NewMediaWriter starts a media file at path. Without replace it refuses
// a path that exists (wrapping os.ErrExist), now and again at Close.
func NewMediaWriter(path string, replace bool) (*MediaWriter, error) {
	if !replace {
		if _, err := os.Lstat(path); err == nil {
			return nil, fmt.Errorf("creating %s: refusing to replace an existing file: %w", path, os.ErrExist)
		}
	}
	tmp := MediaTempPath(path)
	// No statistics: the bounds of the data column would store items again.
	w, err := createParquet[MediaItem](tmp, MediaFormat, &zstdCodec{level: zstd.SpeedDefault},
		parquet.DataPageStatistics(false), parquet.SkipPageBounds("data"))
	if err != nil {
		return nil, err
	}
	return &MediaWriter{w: w, path: path, tmp: tmp, replace: replace, seen: map[string]struct{}{}}, nil
}

// Put stores data (once per distinct content) and returns m as a real item
// of it: Hash and Bytes set, Seed, Data and URL cleared. The caller gives
// Kind and Format and the shape (Width, Height, Frames, DurationMs), from
// internal/media's Probe; Put does not decode data. It refuses an empty
// item, one over MaxMediaItemBytes, and a file growing past
// MaxMediaFileBytes. data may be reused once Put returns.
func (w *MediaWriter) Put(m Media, data []byte) (Media, error) {
	if w.done {
		return m, fmt.Errorf("%s: media writer is closed", w.path)
	}
	if err := checkItemSize(int64(len(data))); err != nil {
		return m, fmt.Errorf("%s item: %w", m.Kind, err)
	}
	h := MediaHash(data)
	m.Hash, m.Bytes, m.Seed, m.Data, m.URL = h, int64(len(data)), 0, "", ""
	if _, ok := w.seen[h]; ok {
		return m, nil
	}
	if w.bytes+m.Bytes > MaxMediaFileBytes {
		return m, fmt.Errorf("%s: media items of more than %d bytes in all", w.path, int64(MaxMediaFileBytes))
	}
	if err := w.w.write([]MediaItem{{Hash: h, Kind: m.Kind, Format: m.Format, Bytes: m.Bytes, Data: data}}); err != nil {
		return m, err
	}
	w.seen[h] = struct{}{}
	w.bytes += m.Bytes
	w.group += m.Bytes
	if w.group >= mediaGroupBytes {
		if err := w.w.Flush(); err != nil {
			return m, err
		}
		w.group = 0
	}
	return m, nil
}

// Items is the number of distinct items stored so far.
func (w *MediaWriter) Items() int { return len(w.seen) }

// Bytes is the bytes of the distinct items stored so far.
func (w *MediaWriter) Bytes() int64 { return w.bytes }

// Path is where Close puts the file.
func (w *MediaWriter) Path() string { return w.path }

// Close finishes the file and renames it into place. With no item stored
// it writes no file (a trace of virtual or no media needs none). Without
// replace it refuses (and leaves the temporary file) if something created
// path meanwhile.
func (w *MediaWriter) Close() error {
	if w.done {
		return nil
	}
	if len(w.seen) == 0 {
		w.Abort()
		return nil
	}
	w.done = true
	if err := w.w.setJSON(MetaMedia, MediaMeta{TracekitVersion: Version, Items: int64(len(w.seen)), Bytes: w.bytes}); err != nil {
		w.w.Abort()
		os.Remove(w.tmp)
		return err
	}
	if err := w.w.close(); err != nil {
		os.Remove(w.tmp)
		return err
	}
	if !w.replace {
		if _, err := os.Lstat(w.path); err == nil {
			return fmt.Errorf("finishing %s: refusing to replace a file created meanwhile (the media are in %s): %w", w.path, w.tmp, os.ErrExist)
		}
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("finishing %s: %w", w.path, err)
	}
	SyncDir(filepath.Dir(w.path))
	return nil
}

// Abort discards the file.
func (w *MediaWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.w.w.Close()
	w.w.f.Close()
	os.Remove(w.tmp)
}

func checkItemSize(n int64) error {
	switch {
	case n == 0:
		return errors.New("no bytes")
	case n > MaxMediaItemBytes:
		return fmt.Errorf("%d bytes, more than the %d a media item may have", n, int64(MaxMediaItemBytes))
	}
	return nil
}

// MediaStore reads a media file: Open indexes its hashes (reading the small
// columns only), Load reads one item's bytes on demand and verifies their
// SHA-256. Load is safe for concurrent use.
type MediaStore struct {
	path  string
	f     *os.File
	pf    *parquet.File
	data  int // the data column's index
	index map[string]mediaLoc
	Meta  MediaMeta
	bytes int64
	kinds map[string]MediaCount
}

// mediaLoc is where an item's row is and what the index says of it.
type mediaLoc struct {
	group int
	row   int64 // within the row group
	bytes int64
}

// MediaCount is a number of items and their bytes.
type MediaCount struct {
	Items int64 `json:"items"`
	Bytes int64 `json:"bytes"`
}

// OpenMediaFile opens a media file and indexes its hashes. It refuses a
// file larger than MaxMediaFileBytes, an item claiming more than
// MaxMediaItemBytes, a hash that is not 64 lower-case hex digits, and a
// hash stored twice, naming the row.
func OpenMediaFile(path string) (*MediaStore, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if st.Size() > MaxMediaFileBytes+(64<<20) {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a media file may hold", path, st.Size(), int64(MaxMediaFileBytes))
	}
	r, err := OpenParquet[MediaItem](path, MediaFormat)
	if err != nil {
		return nil, err
	}
	r.r.Close() // the rows are read column by column, below
	s := &MediaStore{path: path, f: r.f, pf: r.pf, index: map[string]mediaLoc{}, kinds: map[string]MediaCount{}}
	if err := r.json(MetaMedia, &s.Meta); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.buildIndex(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *MediaStore) column(name string) (int, error) {
	leaf, ok := s.pf.Schema().Lookup(name)
	if !ok {
		return 0, fmt.Errorf("%s: no %s column: %w", s.path, name, ErrWrongFormat)
	}
	return leaf.ColumnIndex, nil
}

func (s *MediaStore) buildIndex() error {
	var cols [4]int // hash, kind, format, bytes
	for i, name := range []string{"hash", "kind", "format", "bytes"} {
		c, err := s.column(name)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	d, err := s.column("data")
	if err != nil {
		return err
	}
	s.data = d
	var first int64 // the file row of the group's first row
	for g, rg := range s.pf.RowGroups() {
		var vals [4][]parquet.Value
		for i, c := range cols {
			if vals[i], err = columnValues(rg.ColumnChunks()[c]); err != nil {
				return fmt.Errorf("%s: reading row group %d: %w", s.path, g, err)
			}
			if int64(len(vals[i])) != rg.NumRows() {
				return fmt.Errorf("%s: row group %d has %d rows but %d values in a column: %w", s.path, g, rg.NumRows(), len(vals[i]), ErrWrongFormat)
			}
		}
		for i := range vals[0] {
			row := first + int64(i)
			h := string(vals[0][i].ByteArray())
			n := vals[3][i].Int64()
			if !ValidMediaHash(h) {
				return fmt.Errorf("%s row %d: hash %q is not a lower-case hex SHA-256", s.path, row, h)
			}
			if n < 0 {
				return fmt.Errorf("%s row %d (hash %s): %d bytes", s.path, row, h, n)
			}
			if err := checkItemSize(n); err != nil {
				return fmt.Errorf("%s row %d (hash %s): %w", s.path, row, h, err)
			}
			if _, dup := s.index[h]; dup {
				return fmt.Errorf("%s row %d: hash %s is stored twice", s.path, row, h)
			}
			s.bytes += n
			if s.bytes > MaxMediaFileBytes {
				return fmt.Errorf("%s: items of more than %d bytes in all", s.path, int64(MaxMediaFileBytes))
			}
			s.index[h] = mediaLoc{group: g, row: int64(i), bytes: n}
			k := string(vals[1][i].ByteArray())
			c := s.kinds[k]
			c.Items++
			c.Bytes += n
			s.kinds[k] = c
		}
		first += rg.NumRows()
	}
	return nil
}

// columnValues reads every value of a column chunk of scalars, the byte
// arrays copied out of the pages.
func columnValues(cc parquet.ColumnChunk) ([]parquet.Value, error) {
	pages := cc.Pages()
	defer pages.Close()
	var out []parquet.Value
	for {
		p, err := pages.ReadPage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		buf := make([]parquet.Value, p.NumValues())
		n, err := p.Values().ReadValues(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			parquet.Release(p)
			return nil, err
		}
		for _, v := range buf[:n] {
			out = append(out, v.Clone())
		}
		parquet.Release(p)
	}
}

// ValidMediaHash reports whether h is a SHA-256 in lower-case hex, as
// Media.Hash holds it.
func ValidMediaHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(h) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Path is the file's path.
func (s *MediaStore) Path() string { return s.path }

// Len is the number of distinct items.
func (s *MediaStore) Len() int { return len(s.index) }

// Bytes is the items' bytes in all.
func (s *MediaStore) Bytes() int64 { return s.bytes }

// Kinds is the items and bytes per kind (MediaImage, MediaVideo,
// MediaAudio).
func (s *MediaStore) Kinds() map[string]MediaCount {
	out := make(map[string]MediaCount, len(s.kinds))
	for k, v := range s.kinds {
		out[k] = v
	}
	return out
}

// Has reports whether the file holds the item of hash, and its size.
func (s *MediaStore) Has(hash string) (int64, bool) {
	l, ok := s.index[hash]
	return l.bytes, ok
}

// ErrMediaMissing is wrapped by Load for a hash the file does not hold,
// ErrMediaDamaged for an item whose stored bytes cannot be read or are not
// those of its hash: bad input either way.
var (
	ErrMediaMissing = errors.New("media item not in the media file")
	ErrMediaDamaged = errors.New("the media file is damaged")
)

// Load reads the bytes of the item of hash and verifies them: their size
// is the one indexed and their SHA-256 is hash. Only that item's page is
// read.
func (s *MediaStore) Load(hash string) ([]byte, error) {
	l, ok := s.index[hash]
	if !ok {
		return nil, fmt.Errorf("%s: hash %s: %w", s.path, hash, ErrMediaMissing)
	}
	pages := s.pf.RowGroups()[l.group].ColumnChunks()[s.data].Pages()
	defer pages.Close()
	if err := pages.SeekToRow(l.row); err != nil {
		return nil, fmt.Errorf("%s: hash %s: seeking to its row: %w", s.path, hash, err)
	}
	p, err := pages.ReadPage()
	if err != nil {
		return nil, fmt.Errorf("%s: hash %s: reading its bytes: %w: %w", s.path, hash, ErrMediaDamaged, err)
	}
	defer parquet.Release(p)
	var v [1]parquet.Value
	n, err := p.Values().ReadValues(v[:])
	if n != 1 {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("no value")
		}
		return nil, fmt.Errorf("%s: hash %s: reading its bytes: %w: %w", s.path, hash, ErrMediaDamaged, err)
	}
	data := v[0].ByteArray()
	if int64(len(data)) != l.bytes {
		return nil, fmt.Errorf("%s: hash %s: %d bytes stored, the file says %d: %w", s.path, hash, len(data), l.bytes, ErrMediaDamaged)
	}
	if got := MediaHash(data); got != hash {
		return nil, fmt.Errorf("%s: hash %s: the stored bytes hash to %s: %w", s.path, hash, got, ErrMediaDamaged)
	}
	return bytes.Clone(data), nil
}

// Close releases the file.
func (s *MediaStore) Close() error { return s.f.Close() }
