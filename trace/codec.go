package trace

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	pzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is the page codec of the files this package writes: zstd
// frames as parquet-go's own codec writes them, but from one encoder kept
// for the writer's life, and, for a recording, with two choices of its
// own for its pages of byte streams.
//
// One encoder: parquet-go's keeps its encoders in a sync.Pool, which
// garbage collections empty, and an encoder given a page larger than a
// zstd block (128 KiB: a recording's event doubles) allocates and clears
// a history of twice its window, 16 MiB at the default window, each time
// it is made anew. The window here is 1 MiB, which holds the pages
// tracekit writes (a larger page compresses with matches up to 1 MiB
// back), so the history is 2 MiB, made once per file.
//
// Byte streams (byteStreams set): a BYTE_STREAM_SPLIT page of doubles (a
// recording's event_gap_us) is eight streams of equal length, byte k of
// every value in stream k, each with its own distribution: for gaps of
// 10-20 ms one stream is nearly random, one holds about 4 bits a byte,
// one 1-2 bits, and the other five repeat one value. zstd codes a block's
// literals with one Huffman table, so a block that holds the end of one
// stream and the start of the next codes both with a table fit to
// neither; Encode therefore ends a block at every eighth of a page whose
// length is a multiple of eight (another page of that length, of 8,192
// or more PLAIN int64s say, pays a few block headers for it). And zstd's default level
// stores a block's literals raw when it finds no match in it, to save
// time: the 4-bit stream would take 8 bits a byte, so the encoder is told
// to Huffman-code them anyway. Each alone gains little or loses: the
// cut blocks of the 4-bit stream are the ones stored raw. The frame
// stays one plain zstd frame; any zstd reader reads it.
type zstdCodec struct {
	level       zstd.EncoderLevel
	byteStreams bool
	once        sync.Once
	enc         *zstd.Encoder
	err         error

	mu  sync.Mutex // enc's stream and out, for a page cut into blocks
	out appender
}

const (
	// zstdWindow is zstdCodec's window.
	zstdWindow = 1 << 20
	// minSplitPage is the smallest page zstdCodec cuts into eight blocks:
	// in smaller ones a block's header and table cost more than a table
	// shared by two streams.
	minSplitPage = 64 << 10
)

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(c.level),
			zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(zstdWindow),
			zstd.WithAllLitEntropyCompression(c.byteStreams))
	})
	if c.err != nil {
		return dst[:0], c.err
	}
	if !c.byteStreams || len(src) < minSplitPage || len(src)%8 != 0 {
		return c.enc.EncodeAll(src, dst[:0]), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.b = dst[:0]
	defer func() { c.out.b = nil }()
	c.enc.Reset(&c.out)
	n := len(src) / 8
	for k := range 8 {
		if _, err := c.enc.Write(src[k*n : (k+1)*n]); err != nil {
			return dst[:0], err
		}
		if err := c.enc.Flush(); err != nil {
			return dst[:0], err
		}
	}
	if err := c.enc.Close(); err != nil {
		return dst[:0], err
	}
	return c.out.b, nil
}

// Decode is parquet-go's: only Encode needs an encoder of the writer's.
func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) { return zstdDecoder.Decode(dst, src) }

var zstdDecoder pzstd.Codec

// appender is an io.Writer that appends to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}
