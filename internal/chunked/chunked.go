package chunked

import (
	"errors"
	"fmt"
)

// Scanner follows HTTP/1.1 chunked transfer coding (RFC 9112 §7.1)
// over the raw bytes of a body as they arrive, in pieces of any size,
// without copying them: it says where each chunk's data lies and where
// the body ends (the terminating zero-size chunk, its trailer section and
// the final CRLF), so that no byte of a following response is taken for
// the body and a connection is reused only when the body ended cleanly.
// The zero Scanner is ready for a body.
type Scanner struct {
	state    chunkState
	size     int64 // data bytes left in the current chunk
	digits   int   // hex digits of the current size line
	lineLen  int   // bytes of the current trailer line
	segs     [][]byte
	trailers int // trailer bytes seen, bounded
}

type chunkState uint8

const (
	csSize    chunkState = iota // reading hex digits
	csExt                       // chunk extension, until LF
	csData                      // size bytes of data
	csDataCR                    // CR after data
	csDataLF                    // LF after data
	csTrailer                   // trailer lines after the last chunk, until an empty line
	csDone                      // the body ended
)

// maxChunkTrailer bounds the trailer section (and a size line's extension).
const maxChunkTrailer = 64 << 10

// ErrMalformed is wrapped by every error of a body that is not valid
// chunked coding.
var ErrMalformed = errors.New("malformed chunked encoding")

// Reset makes c ready for the next body, keeping its buffer.
func (c *Scanner) Reset() {
	segs := c.segs[:0]
	*c = Scanner{segs: segs}
}

// Done reports whether the body ended.
func (c *Scanner) Done() bool { return c.state == csDone }

// Scan consumes p. It returns the data pieces p holds (sub-slices of p,
// valid until the next Scan), and end: the length of p's prefix that
// belongs to the body (len(p) unless the body ended inside p). done
// reports the body's end.
func (c *Scanner) Scan(p []byte) (segs [][]byte, end int, done bool, err error) {
	c.segs = c.segs[:0]
	i := 0
	for i < len(p) {
		switch c.state {
		case csSize:
			b := p[i]
			switch {
			case hexVal(b) >= 0:
				if c.digits++; c.digits > 15 {
					return c.segs, i, false, fmt.Errorf("%w: chunk size too long", ErrMalformed)
				}
				c.size = c.size<<4 | int64(hexVal(b))
			case b == ';' || b == ' ' || b == '\t' || b == '\r':
				if c.digits == 0 {
					return c.segs, i, false, fmt.Errorf("%w: no chunk size", ErrMalformed)
				}
				c.state = csExt
			case b == '\n':
				if c.digits == 0 {
					return c.segs, i, false, fmt.Errorf("%w: no chunk size", ErrMalformed)
				}
				c.endSizeLine()
			default:
				return c.segs, i, false, fmt.Errorf("%w: byte %q in a chunk size", ErrMalformed, b)
			}
			i++
		case csExt:
			if p[i] == '\n' {
				c.endSizeLine()
			} else if c.lineLen++; c.lineLen > maxChunkTrailer {
				return c.segs, i, false, fmt.Errorf("%w: chunk extension too long", ErrMalformed)
			}
			i++
		case csData:
			n := int64(len(p) - i)
			if n > c.size {
				n = c.size
			}
			c.segs = append(c.segs, p[i:i+int(n)])
			i += int(n)
			if c.size -= n; c.size == 0 {
				c.state = csDataCR
			}
		case csDataCR:
			switch p[i] {
			case '\r':
				c.state = csDataLF
			case '\n':
				c.state = csSize
			default:
				return c.segs, i, false, fmt.Errorf("%w: no CRLF after chunk data", ErrMalformed)
			}
			i++
		case csDataLF:
			if p[i] != '\n' {
				return c.segs, i, false, fmt.Errorf("%w: no CRLF after chunk data", ErrMalformed)
			}
			c.state = csSize
			i++
		case csTrailer:
			b := p[i]
			i++
			if c.trailers++; c.trailers > maxChunkTrailer {
				return c.segs, i, false, fmt.Errorf("%w: trailer section too long", ErrMalformed)
			}
			switch {
			case b == '\n' && c.lineLen == 0:
				c.state = csDone
				return c.segs, i, true, nil
			case b == '\n':
				c.lineLen = 0
			case b == '\r' && c.lineLen == 0:
				// the CR of the final CRLF: not part of a line
			default:
				c.lineLen++
			}
		case csDone:
			return c.segs, i, true, nil
		}
	}
	return c.segs, len(p), c.state == csDone, nil
}

// endSizeLine starts the chunk whose size line just ended.
func (c *Scanner) endSizeLine() {
	c.digits, c.lineLen = 0, 0
	if c.size == 0 {
		c.state = csTrailer
		return
	}
	c.state = csData
}

func hexVal(b byte) int {
	switch {
	case '0' <= b && b <= '9':
		return int(b - '0')
	case 'a' <= b && b <= 'f':
		return int(b-'a') + 10
	case 'A' <= b && b <= 'F':
		return int(b-'A') + 10
	}
	return -1
}

// AppendChunk frames p as one chunk: its size in hex, CRLF, p, CRLF.
func AppendChunk(dst, p []byte) []byte {
	dst = AppendHex(dst, uint64(len(p)))
	dst = append(dst, '\r', '\n')
	dst = append(dst, p...)
	return append(dst, '\r', '\n')
}

// AppendHex appends v in lower-case hexadecimal, a chunk size.
func AppendHex(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	if v == 0 {
		return append(dst, '0')
	}
	var tmp [16]byte
	i := len(tmp)
	for v > 0 {
		i--
		tmp[i] = digits[v&15]
		v >>= 4
	}
	return append(dst, tmp[i:]...)
}
