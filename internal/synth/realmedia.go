package synth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// MediaImporter is a source whose conversations carry real media items
// (trace.Media.Hash set): the files a dataset names, read, probed and
// stored by content in the trace's media file. Generate hands it the
// media file's writer before it asks for the conversations, and closes
// the writer (renames the file into place) before it writes the trace.
type MediaImporter interface {
	Source
	UseMediaWriter(w *trace.MediaWriter)
}

// ErrNoMediaWriter is a MediaImporter's error when it was asked for its
// conversations with no media writer to store its items in.
var ErrNoMediaWriter = errors.New("no media file to store the dataset's images in")

// imageFiles reads the image files a dataset names: a path is taken
// relative to dir (the dataset file's directory, or an image directory the
// caller gives), or as it is when absolute or given as a file:// URL; an
// http(s) URL is refused (tracekit downloads nothing). Each file is read
// once, decoded (media.Probe: a file a server could not open is refused)
// and stored by content in the media file (a copy of an image under
// another name is stored once).
type imageFiles struct {
	dataset string // the dataset file, for messages
	dir     string
	w       *trace.MediaWriter
	seen    map[string]trace.Media // by resolved path
	buf     []byte
}

func newImageFiles(dataset, imageDir string, w *trace.MediaWriter) *imageFiles {
	dir := imageDir
	if dir == "" {
		dir = filepath.Dir(dataset)
	}
	return &imageFiles{dataset: dataset, dir: dir, w: w, seen: map[string]trace.Media{}}
}

// load reads, probes and stores the image named name by record rec (a
// phrase such as `record 3 (id "a1")`) and returns the trace's item.
func (f *imageFiles) load(rec, name string) (trace.Media, error) {
	where := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: image %q: %s", f.dataset, rec, name, fmt.Sprintf(format, args...))
	}
	p := strings.TrimSpace(name)
	lower := strings.ToLower(p)
	switch {
	case p == "":
		return trace.Media{}, where("an empty path")
	case strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://"):
		return trace.Media{}, where("a URL: tracekit downloads nothing; download the images and give their local paths (relative paths are read from --image-dir or the dataset's directory)")
	case strings.HasPrefix(lower, "file://"):
		p = p[len("file://"):]
	case strings.HasPrefix(lower, "data:"):
		return trace.Media{}, where("a data URI: want a file path")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.dir, p)
	}
	if m, ok := f.seen[p]; ok {
		return m, nil
	}
	fh, err := os.Open(p)
	if err != nil {
		return trace.Media{}, where("%v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	switch {
	case err != nil:
		return trace.Media{}, where("%v", err)
	case !st.Mode().IsRegular():
		return trace.Media{}, where("%s is not a regular file", p)
	case st.Size() > trace.MaxMediaItemBytes:
		return trace.Media{}, where("%s has %d bytes, more than the %d a media item may have", p, st.Size(), int64(trace.MaxMediaItemBytes))
	}
	// read at most one byte past the cap: a file that grew is refused too
	f.buf = slices.Grow(f.buf[:0], int(st.Size())+1)
	if f.buf, err = readAllLimit(fh, f.buf, trace.MaxMediaItemBytes+1); err != nil {
		return trace.Media{}, where("reading %s: %v", p, err)
	}
	if len(f.buf) > trace.MaxMediaItemBytes {
		return trace.Media{}, where("%s has more than the %d bytes a media item may have", p, int64(trace.MaxMediaItemBytes))
	}
	info, err := media.Probe(f.buf)
	if err != nil {
		return trace.Media{}, where("%s does not decode as an image: %v", p, err)
	}
	if info.Kind != trace.MediaImage {
		return trace.Media{}, where("%s is a %s (%s), not an image", p, info.Kind, info.Format)
	}
	m, err := f.w.Put(trace.Media{Kind: info.Kind, Format: info.Format, Width: int32(info.Width), Height: int32(info.Height)}, f.buf)
	if err != nil {
		return trace.Media{}, where("storing %s: %v", p, err)
	}
	f.seen[p] = m
	return m, nil
}

// readAllLimit appends what r holds to dst, at most limit bytes.
func readAllLimit(r io.Reader, dst []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := lr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// imagePaths reads a dataset's image field: one path or a list of them;
// absent or null is none.
func imagePaths(raw []byte) ([]string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("want a path or a list of paths, got %s", s[:min(len(s), 60)])
	}
	return list, nil
}
