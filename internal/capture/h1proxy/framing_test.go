package h1proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http/httputil"
	"testing"
)

// TestChunkScanner: a chunked body cut into pieces at every possible size
// gives the data net/http's chunked reader gives, and the body's end is
// found exactly, with bytes of a following message left out.
func TestChunkScanner(t *testing.T) {
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
			var cs chunkScanner
			var got []byte
			consumed := 0
			done := false
			for off := 0; off < len(wire) && !done; off += piece {
				p := wire[off:min(off+piece, len(wire))]
				segs, end, d, err := cs.scan(p)
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
		var cs chunkScanner
		var got []byte
		w := wire.Bytes()
		done := false
		for len(w) > 0 && !done {
			n := 1 + r.IntN(len(w))
			segs, end, d, err := cs.scan(w[:n])
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
		var cs chunkScanner
		if _, _, _, err := cs.scan([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestChunkScannerAllocs: scanning allocates nothing once warm.
func TestChunkScannerAllocs(t *testing.T) {
	wire := appendChunk(nil, []byte("data: {\"choices\":[{\"x\":1}]}\n\n"))
	var cs chunkScanner
	if segs, _, _, err := cs.scan(wire); err != nil || len(segs) != 1 {
		t.Fatalf("%d pieces, %v", len(segs), err)
	}
	if n := testing.AllocsPerRun(100, func() { cs.scan(wire) }); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
}
