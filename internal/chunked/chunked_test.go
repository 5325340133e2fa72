package chunked

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httputil"
	"strings"
	"testing"
)

// TestScanner: a chunked body cut into pieces at every possible size
// gives the data net/http's chunked reader gives, and the body's end is
// found exactly, with bytes of a following message left out.
func TestScanner(t *testing.T) {
	bodies := []string{
		"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
		"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer-A: x\r\nTrailer-B: y\r\n\r\n",
		"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
		"0\r\n\r\n",
	}
	after := "HTTP/1.1 200 OK\r\n" // the next message: never part of the body
	for _, body := range bodies {
		want, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader([]byte(body))))
		if err != nil {
			t.Fatal(err)
		}
		wire := []byte(body + after)
		for _, piece := range []int{1, 2, 3, 7, len(wire)} {
			var cs Scanner
			var got []byte
			consumed := 0
			done := false
			for off := 0; off < len(wire) && !done; off += piece {
				p := wire[off:min(off+piece, len(wire))]
				segs, end, d, err := cs.Scan(p)
				if err != nil {
					t.Fatalf("%q in pieces of %d: %v", body, piece, err)
				}
				for _, s := range segs {
					got = append(got, s...)
				}
				consumed += end
				done = d
			}
			if !done || consumed != len(body) || !bytes.Equal(got, want) {
				t.Fatalf("%q in pieces of %d: done %v, consumed %d of %d, data %q want %q", body, piece, done, consumed, len(body), got, want)
			}
		}
	}
	// Random bodies split at random points.
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var wire bytes.Buffer
		var want []byte
		cw := httputil.NewChunkedWriter(&wire)
		for range r.IntN(6) {
			b := make([]byte, 1+r.IntN(300))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			cw.Write(b)
			want = append(want, b...)
		}
		cw.Close()
		wire.WriteString("\r\n")
		var cs Scanner
		var got []byte
		w := wire.Bytes()
		done := false
		for len(w) > 0 && !done {
			n := 1 + r.IntN(len(w))
			segs, end, d, err := cs.Scan(w[:n])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range segs {
				got = append(got, s...)
			}
			if d && end != n {
				t.Fatalf("ended at %d of a final piece of %d", end, n)
			}
			w, done = w[n:], d
		}
		if !done || len(w) != 0 || !bytes.Equal(got, want) {
			t.Fatalf("random body: done %v, %d bytes left, data equal %v", done, len(w), bytes.Equal(got, want))
		}
	}
	for _, bad := range []string{"zz\r\n", "\r\n", "5\r\nhelloXX", "fffffffffffffffff\r\n"} {
		var cs Scanner
		if _, _, _, err := cs.Scan([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestScannerAllocs: scanning allocates nothing once warm.
func TestScannerAllocs(t *testing.T) {
	wire := AppendChunk(nil, []byte("data: {\"choices\":[{\"x\":1}]}\n\n"))
	var cs Scanner
	if segs, _, _, err := cs.Scan(wire); err != nil || len(segs) != 1 {
		t.Fatalf("%d pieces, %v", len(segs), err)
	}
	if n := testing.AllocsPerRun(100, func() { cs.Scan(wire) }); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
}

// FuzzScanner: whatever the chunk sizes and however the network cuts the
// body, the scanner gives back exactly the data net/http's writer framed,
// ends where the body ends and leaves what follows it.
func FuzzScanner(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\n"), uint64(1))
	f.Add(bytes.Repeat([]byte("x"), 5000), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var wire bytes.Buffer
		w := httputil.NewChunkedWriter(&wire)
		for rest := data; len(rest) > 0; {
			n := min(1+rng.IntN(300), len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Close()
		wire.WriteString("\r\n")
		body := wire.Len()
		wire.WriteString("HTTP/1.1 200 OK\r\n") // what a next response would be
		raw := wire.Bytes()
		var cs Scanner
		var got []byte
		used, done := 0, false
		for at := 0; at < len(raw) && !done; {
			n := 1 + rng.IntN(len(raw)-at)
			segs, end, d, err := cs.Scan(raw[at : at+n])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range segs {
				got = append(got, s...)
			}
			used += end
			at += n
			done = d
		}
		if !done || used != body || !bytes.Equal(got, data) {
			t.Fatalf("done %v, the body took %d bytes of %d, data equal %v", done, used, body, bytes.Equal(got, data))
		}
	})
}

// Framing that is legal but unusual is read; every malformed body is an
// error wrapping ErrMalformed.
func TestScannerFraming(t *testing.T) {
	for _, tc := range []struct {
		raw, data string
		bad       bool
	}{
		{raw: "5\nhello\n0\n\n", data: "hello"},
		{raw: "A\r\n0123456789\r\n0\r\n\r\n", data: "0123456789"},
		{raw: "2\r\nabc\r\n", data: "ab", bad: true},
		{raw: "1;" + strings.Repeat("x", maxChunkTrailer+1), bad: true},
	} {
		var cs Scanner
		segs, _, done, err := cs.Scan([]byte(tc.raw))
		var got []byte
		for _, s := range segs {
			got = append(got, s...)
		}
		if string(got) != tc.data || (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrMalformed)) || (!tc.bad && !done) {
			t.Errorf("%.40q: data %q done %v error %v", tc.raw, got, done, err)
		}
	}
}
