package trace

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	pzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is the page codec of the files this package writes: zstd
// frames as parquet-go's own codec writes them, but from one encoder kept
// for the writer's life. parquet-go's keeps its encoders in a sync.Pool,
// which garbage collections empty, and an encoder given a page larger
// than a zstd block (128 KiB: a recording's event doubles) allocates and
// clears a history of twice its window, 16 MiB at the default window,
// each time it is made anew. The window here is 1 MiB, which holds the
// pages tracekit writes (a larger page compresses with matches up to
// 1 MiB back), so the history is 2 MiB, made once per file.
type zstdCodec struct {
	level zstd.EncoderLevel
	once  sync.Once
	enc   *zstd.Encoder
	err   error
}

// zstdWindow is zstdCodec's window.
const zstdWindow = 1 << 20

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(c.level),
			zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(zstdWindow))
	})
	if c.err != nil {
		return dst[:0], c.err
	}
	return c.enc.EncodeAll(src, dst[:0]), nil
}

// Decode is parquet-go's: only Encode needs an encoder of the writer's.
func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) { return zstdDecoder.Decode(dst, src) }

var zstdDecoder pzstd.Codec
