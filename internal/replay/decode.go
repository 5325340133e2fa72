package replay

import (
	"bytes"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Replay asks for Accept-Encoding: identity, so a compressed stream is a
// server or proxy ignoring that. It is decoded rather than recorded as
// garbage: each request goroutine keeps one decoder per encoding and
// resets it per response, so a compressed stream costs no allocation per
// event. The decoded bytes are stamped with the time of the network read
// that brought them (stampReader), not the time the decoder returned.

// stampReader passes reads through and keeps the time the last one
// returned, and the error one returned (io.EOF at the body's end): a
// decoder's failure is told from the network's by it.
type stampReader struct {
	r    io.Reader
	now  func() int64
	last int64
	err  error
}

func (s *stampReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.last = s.now()
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *stampReader) stamp() int64 { return s.last }

// decoders are one request goroutine's reusable decompressors.
type decoders struct {
	net  stampReader
	gz   *gzip.Reader
	zl   io.ReadCloser
	zs   *zstd.Decoder
	br   *brotli.Reader
	last io.Reader // the decoder in use, nil for identity
}

// decode returns a reader of body decoded per the Content-Encoding enc
// (gzip, x-gzip, deflate, zstd, br), whose reads are stamped by
// d.net.stamp. An unknown or broken encoding is an error naming it.
func (d *decoders) decode(enc []byte, body io.Reader, now func() int64) (io.Reader, error) {
	d.net = stampReader{r: body, now: now}
	var err error
	switch string(bytes.ToLower(bytes.TrimSpace(enc))) {
	case "gzip", "x-gzip":
		if d.gz == nil {
			d.gz, err = gzip.NewReader(&d.net)
		} else {
			err = d.gz.Reset(&d.net)
		}
		if err == nil {
			d.gz.Multistream(false)
		}
		d.last = d.gz
	case "deflate":
		if d.zl == nil {
			d.zl, err = zlib.NewReader(&d.net)
		} else {
			err = d.zl.(zlib.Resetter).Reset(&d.net, nil)
		}
		d.last = d.zl
	case "zstd":
		if d.zs == nil {
			d.zs, err = zstd.NewReader(&d.net, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		} else {
			err = d.zs.Reset(&d.net)
		}
		d.last = d.zs
	case "br":
		if d.br == nil {
			d.br = brotli.NewReader(&d.net)
		} else {
			err = d.br.Reset(&d.net)
		}
		d.last = d.br
	default:
		return nil, fmt.Errorf("the response is encoded with Content-Encoding: %s, which replay cannot decode (it asked for Accept-Encoding: identity)", enc)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding the response (Content-Encoding: %s): %w", enc, err)
	}
	return d.last, nil
}
