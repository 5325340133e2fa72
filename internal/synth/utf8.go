package synth

import (
	"github.com/tracekit/tracekit/internal/blocktext"

	"io"
	"strconv"
	"unicode/utf8"
)

// utf8Counter passes a stream through and counts its bytes that are not
// part of valid UTF-8, the way utf8.DecodeRune walks it: each byte that
// starts no valid sequence counts once (so does each byte of a sequence
// cut short by the end of the stream). A sequence split across two reads
// is carried into the next one, so the count does not depend on how the
// stream is cut.
type utf8Counter struct {
	r       io.Reader
	invalid int64
	carry   [utf8.UTFMax - 1]byte // an incomplete sequence ending the last read
	nc      int
}

func (c *utf8Counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.scan(p[:n])
	if err != nil {
		c.invalid += int64(c.nc) // cut short by the end (or a read error)
		c.nc = 0
	}
	return n, err
}

// Invalid is the count of invalid bytes read so far.
func (c *utf8Counter) Invalid() int64 { return c.invalid }

func (c *utf8Counter) scan(b []byte) {
	if c.nc > 0 {
		// Finish the carried sequence with the first bytes of b.
		var t [2*utf8.UTFMax - 1]byte
		n := copy(t[:], c.carry[:c.nc])
		n += copy(t[n:], b[:min(len(b), utf8.UTFMax)])
		i := 0
		for i < c.nc {
			if !utf8.FullRune(t[i:n]) {
				// b ended inside the sequence too: carry on.
				c.nc = copy(c.carry[:], t[i:n])
				return
			}
			r, size := utf8.DecodeRune(t[i:n])
			if r == utf8.RuneError && size == 1 {
				c.invalid++
			}
			i += size
		}
		b = b[i-c.nc:]
		c.nc = 0
	}
	// An incomplete sequence at the end waits for the next read.
	tail := 0
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				tail = k
			}
			break
		}
	}
	body := b[:len(b)-tail]
	if !utf8.Valid(body) {
		for len(body) > 0 {
			r, size := utf8.DecodeRune(body)
			if r == utf8.RuneError && size == 1 {
				c.invalid++
			}
			body = body[size:]
		}
	}
	c.nc = copy(c.carry[:], b[len(b)-tail:])
}

// countInvalidUTF8 counts the invalid bytes of s, as utf8Counter does.
func countInvalidUTF8(s string) int64 { return blocktext.InvalidUTF8Bytes(s) }

// The report key of invalid UTF-8 bytes in an input file, and in a
// corpus's text files; each is set only when there were some.
const (
	reportInvalidUTF8     = "invalid_utf8_bytes"
	reportTextInvalidUTF8 = "text_invalid_utf8_bytes"
)

// addUTF8Report sets key in m to n when n > 0.
func addUTF8Report(m map[string]string, key string, n int64) {
	if n > 0 {
		m[key] = strconv.FormatInt(n, 10)
	}
}
