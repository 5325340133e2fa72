package synth

import (
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// chunkReader returns its data in reads of the given sizes.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data))
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[0])
		c.sizes = c.sizes[1:]
	}
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// The invalid-byte count of a stream is the same whatever its reads'
// boundaries, and the same as the whole text's: valid multi-byte runes cut
// by a boundary are not counted, lone, stray and truncated bytes are.
func TestUTF8CounterIndependentOfReads(t *testing.T) {
	pieces := [][]byte{[]byte("plain "), []byte("é"), []byte("€"), []byte("😀"), {0xff}, {0xc3}, {0x80}, {0xe2, 0x82}, {0xf0, 0x9f, 0x98}, []byte("\n")}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		var data []byte
		for range 1 + r.IntN(40) {
			data = append(data, pieces[r.IntN(len(pieces))]...)
		}
		want := countInvalidUTF8(string(data))
		var sizes []int
		for range len(data) {
			sizes = append(sizes, 1+r.IntN(5))
		}
		c := &utf8Counter{r: &chunkReader{data: data, sizes: sizes}}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != string(data) {
			t.Fatalf("trial %d: read %q, %v", trial, got, err)
		}
		if c.Invalid() != want {
			t.Fatalf("trial %d: %q read in pieces %v: %d invalid bytes, whole %d", trial, data, sizes, c.Invalid(), want)
		}
	}
	// Known counts: a lone continuation, a stray 0xff, a lead byte cut off
	// by the end of the stream (both of its bytes).
	for _, c := range []struct {
		s    string
		want int64
	}{{"ok é 😀", 0}, {"a\x80b", 1}, {"\xff\xfe", 2}, {"end\xf0\x9f", 2}, {"\xe2\x82\xac", 0}} {
		u := &utf8Counter{r: iotest.OneByteReader(&chunkReader{data: []byte(c.s)})}
		io.ReadAll(u)
		if u.Invalid() != c.want || countInvalidUTF8(c.s) != c.want {
			t.Errorf("%q: counter %d, whole %d, want %d", c.s, u.Invalid(), countInvalidUTF8(c.s), c.want)
		}
	}
}
