package trace

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ErrCorrupt is wrapped by VerifyPages (and by a read that meets a
// damaged page) when a file's bytes were altered after it was written.
var ErrCorrupt = parquet.ErrCorrupted

// VerifyPages reads every page of the file once, without decoding it: each
// page header must parse and fit its column chunk, and each page's bytes
// must match the CRC-32 its header carries. It is as cheap as reading the
// file (no decompression), so a command checks a file this way before it
// creates any output, rather than meeting a damaged page midway. The error
// names the row group, the column and the page's byte offset.
func (r *ParquetReader[T]) VerifyPages() error {
	md := r.pf.Metadata()
	leaves := r.pf.Schema().Columns()
	var buf []byte
	for g, rg := range md.RowGroups {
		for c := range rg.Columns {
			col := &rg.Columns[c].MetaData
			name := fmt.Sprintf("#%d", c)
			if c < len(leaves) {
				name = strings.Join(leaves[c], ".")
			}
			var err error
			if buf, err = r.verifyChunk(col, buf); err != nil {
				return fmt.Errorf("%s: row group %d, column %s: %w", r.path, g, name, err)
			}
		}
	}
	return nil
}

// verifyChunk checks the pages of one column chunk; buf is scratch.
func (r *ParquetReader[T]) verifyChunk(col *format.ColumnMetaData, buf []byte) ([]byte, error) {
	start := col.DataPageOffset
	if col.DictionaryPageOffset != 0 && col.DictionaryPageOffset < start {
		start = col.DictionaryPageOffset
	}
	size := col.TotalCompressedSize
	if start < 4 || size < 0 || start+size > r.pf.Size()-8 {
		return buf, fmt.Errorf("the chunk's bytes %d-%d lie outside the file's pages: %w", start, start+size, ErrCorrupt)
	}
	cr := &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(r.f, start, size), 1<<16)}
	dec := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(cr))
	for cr.n < size {
		at := start + cr.n
		var h format.PageHeader
		if err := dec.Decode(&h); err != nil {
			return buf, fmt.Errorf("page header at byte %d: %v: %w", at, err, ErrCorrupt)
		}
		if h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > size-cr.n {
			return buf, fmt.Errorf("page header at byte %d: a page of %d bytes does not fit its chunk: %w", at, h.CompressedPageSize, ErrCorrupt)
		}
		if cap(buf) < int(h.CompressedPageSize) {
			buf = make([]byte, h.CompressedPageSize)
		}
		body := buf[:h.CompressedPageSize]
		bodyAt := start + cr.n
		if _, err := io.ReadFull(cr, body); err != nil {
			return buf, fmt.Errorf("page at byte %d: %w", bodyAt, err)
		}
		if h.CRC != 0 {
			if got := crc32.ChecksumIEEE(body); got != uint32(h.CRC) {
				return buf, fmt.Errorf("the page at bytes %d-%d fails its checksum (crc32 0x%08X, header says 0x%08X): %w",
					bodyAt, bodyAt+int64(len(body)), got, uint32(h.CRC), ErrCorrupt)
			}
		}
	}
	return buf, nil
}

// countingReader counts the bytes read through it (the thrift decoder
// reads byte by byte, the page bodies in full).
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// VerifyPages checks every page of the trace file (ParquetReader.VerifyPages).
func (t *TraceReader) VerifyPages() error { return t.r.VerifyPages() }
