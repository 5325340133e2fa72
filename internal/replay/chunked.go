package replay

import (
	"errors"
	"fmt"
)

// chunked undoes HTTP/1.1's chunked transfer coding (RFC 9112 section 7.1)
// in place, over whatever slices of the body the network hands it: its
// state carries a size line, a chunk or a trailer split between two
// reads, so one decoder serves any read size.
//
// The body is a series of chunks, each a line "SIZE[;ext]\r\n" (SIZE in
// hexadecimal), then SIZE bytes of data and "\r\n"; a chunk of size 0 ends
// it, followed by trailer lines and an empty line. Bare "\n" line ends are
// taken as well, as every common client does.
type chunked struct {
	state chunkState
	left  int64 // data bytes left in the current chunk
	line  int   // bytes of the current size or trailer line so far
	off   int64 // raw body bytes consumed, for messages
}

type chunkState uint8

const (
	chunkSize        chunkState = iota // the size's hex digits
	chunkExt                           // after the size: extensions up to the line end
	chunkSizeLF                        // the size line's CR came: its LF next
	chunkData                          // left data bytes
	chunkDataCR                        // the data's closing CRLF
	chunkDataLF                        // its LF
	chunkTrailer                       // the start of a trailer line, or the final empty line
	chunkTrailerLine                   // inside a trailer line
	chunkEndLF                         // the final empty line's LF
	chunkDone                          // the body ended
)

// maxChunkLine bounds a size line (with its extensions) and a trailer
// line: a peer sending more is not speaking HTTP.
const maxChunkLine = 4 << 10

// errChunked marks a malformed chunked body.
var errChunked = errors.New("malformed chunked body")

// done reports whether the last chunk and its trailers were read.
func (d *chunked) done() bool { return d.state == chunkDone }

// decode consumes the raw body bytes p and moves the data they carry to
// the front of p: p[:n] is that data, used is how many bytes of p were
// the body's (all of them unless the body ended within p: the rest is
// not part of it).
func (d *chunked) decode(p []byte) (n, used int, err error) {
	i := 0
	for i < len(p) && d.state != chunkDone {
		if d.state == chunkData {
			k := int(min(d.left, int64(len(p)-i)))
			n += copy(p[n:], p[i:i+k])
			i += k
			d.off += int64(k)
			if d.left -= int64(k); d.left == 0 {
				d.state = chunkDataCR
			}
			continue
		}
		c := p[i]
		i++
		if err := d.step(c); err != nil {
			return n, i, err
		}
		d.off++
	}
	return n, i, nil
}

// step advances the framing state by one byte c outside a chunk's data.
func (d *chunked) step(c byte) error {
	switch d.state {
	case chunkSize:
		v, ok := hexVal(c)
		switch {
		case ok:
			if d.left > (1<<59)-1 {
				return d.errorf("a chunk size of 2^63 bytes or more")
			}
			d.left = d.left<<4 | int64(v)
			d.line++
		case d.line == 0:
			return d.errorf("expected a chunk size, got %q", c)
		case c == ';' || c == ' ' || c == '\t':
			d.state = chunkExt
		case c == '\r':
			d.state = chunkSizeLF
		case c == '\n':
			d.endSize()
		default:
			return d.errorf("expected a hexadecimal chunk size, got %q", c)
		}
	case chunkExt:
		if d.line++; d.line > maxChunkLine {
			return d.errorf("a chunk size line longer than %d bytes", maxChunkLine)
		}
		switch c {
		case '\r':
			d.state = chunkSizeLF
		case '\n':
			d.endSize()
		}
	case chunkSizeLF:
		if c != '\n' {
			return d.errorf("expected LF after a chunk size's CR, got %q", c)
		}
		d.endSize()
	case chunkDataCR:
		switch c {
		case '\r':
			d.state = chunkDataLF
		case '\n':
			d.state = chunkSize
		default:
			return d.errorf("expected CRLF after a chunk's data, got %q", c)
		}
	case chunkDataLF:
		if c != '\n' {
			return d.errorf("expected LF after a chunk's data, got %q", c)
		}
		d.state = chunkSize
	case chunkTrailer:
		switch c {
		case '\r':
			d.state = chunkEndLF
		case '\n':
			d.state = chunkDone
		default:
			d.state, d.line = chunkTrailerLine, 1
		}
	case chunkTrailerLine:
		if d.line++; d.line > maxChunkLine {
			return d.errorf("a trailer line longer than %d bytes", maxChunkLine)
		}
		if c == '\n' {
			d.state = chunkTrailer
		}
	case chunkEndLF:
		if c != '\n' {
			return d.errorf("expected LF at the end of the trailers, got %q", c)
		}
		d.state = chunkDone
	}
	return nil
}

// endSize ends a size line: the chunk's data follows, or the trailers
// after the last chunk.
func (d *chunked) endSize() {
	d.line = 0
	if d.left == 0 {
		d.state = chunkTrailer
		return
	}
	d.state = chunkData
}

func (d *chunked) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d", errChunked, fmt.Sprintf(format, args...), d.off)
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
