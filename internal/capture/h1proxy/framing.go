package h1proxy

import (
	"errors"
	"fmt"
)

// chunkScanner follows HTTP/1.1 chunked transfer coding (RFC 9112 §7.1)
// over the raw bytes of a response as they arrive, in pieces of any size,
// without copying them: the proxy forwards those bytes verbatim and the
// scanner only says where each chunk's data lies (for the tap) and
// where the body ends (the terminating zero-size chunk, its trailer
// section and the final CRLF), so that no byte of a following response is
// forwarded and the connection is reused only when the body ended cleanly.
type chunkScanner struct {
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

var errChunked = errors.New("malformed chunked encoding")

func (c *chunkScanner) reset() {
	segs := c.segs[:0]
	*c = chunkScanner{segs: segs}
}

// scan consumes p. It returns the data pieces p holds (sub-slices of p,
// valid until the next scan), and end: the length of p's prefix that
// belongs to the body (len(p) unless the body ended inside p). done
// reports the body's end.
func (c *chunkScanner) scan(p []byte) (segs [][]byte, end int, done bool, err error) {
	c.segs = c.segs[:0]
	i := 0
	for i < len(p) {
		switch c.state {
		case csSize:
			b := p[i]
			switch {
			case hexVal(b) >= 0:
				if c.digits++; c.digits > 15 {
					return c.segs, i, false, fmt.Errorf("%w: chunk size too long", errChunked)
				}
				c.size = c.size<<4 | int64(hexVal(b))
			case b == ';' || b == ' ' || b == '\t' || b == '\r':
				if c.digits == 0 {
					return c.segs, i, false, fmt.Errorf("%w: no chunk size", errChunked)
				}
				c.state = csExt
			case b == '\n':
				if c.digits == 0 {
					return c.segs, i, false, fmt.Errorf("%w: no chunk size", errChunked)
				}
				c.endSizeLine()
			default:
				return c.segs, i, false, fmt.Errorf("%w: byte %q in a chunk size", errChunked, b)
			}
			i++
		case csExt:
			if p[i] == '\n' {
				c.endSizeLine()
			} else if c.lineLen++; c.lineLen > maxChunkTrailer {
				return c.segs, i, false, fmt.Errorf("%w: chunk extension too long", errChunked)
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
				return c.segs, i, false, fmt.Errorf("%w: no CRLF after chunk data", errChunked)
			}
			i++
		case csDataLF:
			if p[i] != '\n' {
				return c.segs, i, false, fmt.Errorf("%w: no CRLF after chunk data", errChunked)
			}
			c.state = csSize
			i++
		case csTrailer:
			b := p[i]
			i++
			if c.trailers++; c.trailers > maxChunkTrailer {
				return c.segs, i, false, fmt.Errorf("%w: trailer section too long", errChunked)
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
func (c *chunkScanner) endSizeLine() {
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

// appendChunk frames p as one chunk: its size in hex, CRLF, p, CRLF.
func appendChunk(dst, p []byte) []byte {
	dst = appendHex(dst, uint64(len(p)))
	dst = append(dst, '\r', '\n')
	dst = append(dst, p...)
	return append(dst, '\r', '\n')
}

func appendHex(dst []byte, v uint64) []byte {
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
