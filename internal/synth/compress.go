package synth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is how an input file is stored, told by its first bytes
// (not its name: a ".csv" may be gzipped and a ".gz" plain).
type Compression string

const (
	Plain Compression = ""
	Gzip  Compression = "gzip"
	Zstd  Compression = "zstd"
)

// Magic numbers: gzip (RFC 1952) and a zstd frame (RFC 8878).
var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// sniff tells the compression of the bytes that start with head.
func sniff(head []byte) Compression {
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		return Zstd
	case bytes.HasPrefix(head, gzipMagic):
		return Gzip
	}
	return Plain
}

// Input is an input file opened for reading its decompressed bytes.
// Raw counts the file's own (compressed) bytes read so far, for progress.
type Input struct {
	io.Reader
	Compression Compression
	Size        int64 // of the file on disk
	f           *os.File
	raw         *countingReader
	close       func()
}

// Raw is the count of the file's bytes read so far.
func (in *Input) Raw() int64 { return in.raw.n }

// Close closes the decompressor and the file.
func (in *Input) Close() error {
	if in.close != nil {
		in.close()
	}
	return in.f.Close()
}

// OpenInput opens path, plain, gzip (concatenated members too) or zstd by
// its magic bytes; progress, if not nil, is called with the file's bytes
// read and its size. A corrupt compressed stream fails a Read with a
// *DecompressError (the caller names the file and line).
func OpenInput(path string, progress func(done, total int64)) (*Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	in := &Input{f: f}
	if st, err := f.Stat(); err == nil {
		in.Size = st.Size()
	}
	in.raw = &countingReader{r: f, progress: progress, total: in.Size}
	br := bufio.NewReaderSize(in.raw, 1<<16)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	in.Compression = sniff(head)
	switch in.Compression {
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading %s: gzip header: %w", path, err)
		}
		in.Reader = &decompressReader{what: "gzip", r: zr}
		in.close = func() { zr.Close() }
	case Zstd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading %s: zstd: %w", path, err)
		}
		in.Reader = &decompressReader{what: "zstd", r: zr}
		in.close = zr.Close
	default:
		in.Reader = br
	}
	return in, nil
}

// ReadInput reads all of path, decompressed as OpenInput does.
func ReadInput(path string) ([]byte, error) {
	in, err := OpenInput(path, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	b, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// DecompressError is a compressed input that cannot be decompressed
// (truncated or corrupt).
type DecompressError struct {
	Codec string
	Err   error
}

func (e *DecompressError) Error() string { return "corrupt " + e.Codec + " data: " + e.Err.Error() }
func (e *DecompressError) Unwrap() error { return e.Err }

// decompressReader turns a decompressor's errors into *DecompressError;
// io.EOF passes through unchanged.
type decompressReader struct {
	what string
	r    io.Reader
}

func (d *decompressReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &DecompressError{Codec: d.what, Err: err}
	}
	return n, err
}
