package replay

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httputil"
	"slices"
	"strings"
	"testing"
)

// chunk encodes data as net/http's chunked writer does, in pieces of the
// given sizes, and ends the body.
func chunk(t testing.TB, data []byte, sizes []int) []byte {
	var b bytes.Buffer
	w := httputil.NewChunkedWriter(&b)
	for len(data) > 0 {
		n := len(data)
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], n), sizes[1:]
		}
		if _, err := w.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	w.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// decodeSplit feeds raw to a decoder cut into pieces at cuts and returns
// the data, and how much of raw the body took.
func decodeSplit(raw []byte, cuts []int) ([]byte, int, error) {
	var d chunked
	var out []byte
	used, at := 0, 0
	for _, c := range append(cuts, len(raw)) {
		if c < at || c > len(raw) {
			continue
		}
		piece := append([]byte(nil), raw[at:c]...)
		n, u, err := d.decode(piece)
		out = append(out, piece[:n]...)
		used += u
		if err != nil {
			return out, used, err
		}
		if d.done() {
			return out, used, nil
		}
		at = c
	}
	if !d.done() {
		return out, used, io.ErrUnexpectedEOF
	}
	return out, used, nil
}

// FuzzChunked: whatever the chunk sizes and however the network cuts the
// body, the decoder gives back exactly the data net/http's writer framed,
// ends where the body ends and leaves what follows it.
func FuzzChunked(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\n"), uint64(1))
	f.Add(bytes.Repeat([]byte("x"), 5000), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var sizes []int
		for range 8 {
			sizes = append(sizes, 1+rng.IntN(300))
		}
		raw := chunk(t, data, sizes)
		body := len(raw)
		raw = append(raw, "HTTP/1.1 200 OK\r\n"...) // what a next response would be
		var cuts []int
		for range rng.IntN(20) {
			cuts = append(cuts, rng.IntN(len(raw)+1))
		}
		slices.Sort(cuts)
		out, used, err := decodeSplit(raw, cuts)
		if err != nil {
			t.Fatalf("%v (cuts %v)", err, cuts)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("decoded %d bytes %q, want %d %q (cuts %v)", len(out), out, len(data), data, cuts)
		}
		if used != body {
			t.Fatalf("the body took %d bytes, it is %d", used, body)
		}
	})
}

// Framing that is legal but unusual decodes; framing that is not fails
// naming the byte.
func TestChunkedFraming(t *testing.T) {
	for _, tc := range []struct {
		name, raw, data, err string
	}{
		{"extensions and trailers", "5;name=value\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", "hello", ""},
		{"bare LF line ends", "5\nhello\n0\n\n", "hello", ""},
		{"upper-case hex", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789", ""},
		{"an empty body", "0\r\n\r\n", "", ""},
		{"not a size", "zz\r\n", "", "expected a chunk size, got 'z' at byte 0"},
		{"data longer than its size", "2\r\nabc\r\n", "ab", "expected CRLF after a chunk's data, got 'c' at byte 5"},
		{"a size beyond int64", "10000000000000000\r\n", "", "2^63 bytes or more at byte 16"},
		{"an endless extension", "1;" + strings.Repeat("x", maxChunkLine+1), "", "a chunk size line longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := decodeSplit([]byte(tc.raw), nil)
			if string(out) != tc.data {
				t.Errorf("data %q, want %q", out, tc.data)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errChunked)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}
