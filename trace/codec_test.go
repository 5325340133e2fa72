package trace

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// splitGapPage is a BYTE_STREAM_SPLIT page of n gaps as a recording holds
// them: requests of 200 events, the first 30-50 ms after the send, then
// one every 10-20 ms, kept to the microsecond; byte k of every double in
// stream k.
func splitGapPage(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, 8*n)
	for i := 0; i < n; {
		o, prev := int64(30e3+rng.Int64N(20e3)), int64(0)
		for k := 0; k < 200 && i < n; k, i = k+1, i+1 {
			bits := math.Float64bits(float64(o - prev))
			for b := range 8 {
				page[b*n+i] = byte(bits >> (8 * b))
			}
			prev, o = o, o+10e3+rng.Int64N(10e3)
		}
	}
	return page
}

// Every page comes back as it went in, whether or not the codec cuts it
// into blocks (a multiple of eight bytes from minSplitPage on), through
// one codec used page after page, and reads back with a zstd decoder that
// is not the one Decode uses (the zstd command, where installed).
func TestZstdCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := &zstdCodec{level: zstd.SpeedDefault, byteStreams: true}
	plain := &zstdCodec{level: zstd.SpeedDefault}
	var dst, back []byte
	for _, n := range []int{0, 1, 7, 8, minSplitPage - 8, minSplitPage - 1, minSplitPage, minSplitPage + 1, minSplitPage + 8, 1 << 20, 3<<20 + 24} {
		pages := map[string][]byte{"random": make([]byte, n), "zeros": make([]byte, n)}
		for i := range pages["random"] {
			pages["random"][i] = byte(rng.Uint32())
		}
		if n%8 == 0 {
			pages["gaps"] = splitGapPage(n / 8)
		}
		for name, src := range pages {
			for _, codec := range []*zstdCodec{c, plain} {
				var err error
				if dst, err = codec.Encode(dst, src); err != nil {
					t.Fatalf("%s page of %d bytes: %v", name, n, err)
				}
				if back, err = codec.Decode(back, dst); err != nil {
					t.Fatalf("%s page of %d bytes: decoding: %v", name, n, err)
				}
				if !bytes.Equal(back, src) {
					t.Fatalf("%s page of %d bytes (byte streams %v): read back differs", name, n, codec.byteStreams)
				}
				if n == 1<<20 {
					zstdCommand(t, dst, src)
				}
			}
		}
	}
}

// zstdCommand decodes frame with the zstd command and compares it to
// want; without the command it says so and returns.
func zstdCommand(t *testing.T, frame, want []byte) {
	t.Helper()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Log("no zstd command: the frames are read back by Go's decoder only")
		return
	}
	p := filepath.Join(t.TempDir(), "page.zst")
	if err := os.WriteFile(p, frame, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("zstd", "-d", "-c", "-q", p).Output()
	if err != nil {
		t.Fatalf("zstd -d: %v", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("zstd -d gives %d bytes that differ from the %d written", len(out), len(want))
	}
}

// A recording's gap page compresses near the information it holds. The
// gaps carry 13.3 bits each at 1 us (log2 of 10,000 values); as doubles'
// byte streams their bytes hold about 13.7 bits (each stream's byte
// entropy, summed): 1.72 bytes a gap. Coded as one ordinary zstd frame
// (the codec without byteStreams, as traces are written) the page takes
// 2.09; with the streams cut
// into their own blocks and all literals Huffman-coded, about 1.81.
func TestZstdCodecByteStreamsSize(t *testing.T) {
	const n = 100_000
	page := splitGapPage(n)
	streams := 0.0
	for b := range 8 {
		var h [256]int
		for _, v := range page[b*n : (b+1)*n] {
			h[v]++
		}
		for _, c := range h {
			if c > 0 {
				p := float64(c) / n
				streams -= p * math.Log2(p) / 8
			}
		}
	}
	// enc is c's bytes a gap for src, over n gaps.
	enc := func(c *zstdCodec, src []byte) float64 {
		out, err := c.Encode(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		return float64(len(out)) / n
	}
	got := enc(&zstdCodec{level: zstd.SpeedDefault, byteStreams: true}, page)
	plain := enc(&zstdCodec{level: zstd.SpeedDefault}, page)
	t.Logf("%.3f bytes a gap (streams' entropy %.3f, one ordinary frame %.3f)", got, streams, plain)
	if got > streams*1.07 || got > plain*0.9 {
		t.Errorf("%.3f bytes a gap: want within 7%% of the streams' entropy, %.3f, and 10%% under one ordinary frame, %.3f", got, streams, plain)
	}
	if math.Abs(streams-1.72) > 0.02 {
		t.Errorf("the model's streams hold %.3f bytes a gap, want about 1.72: the model changed", streams)
	}
	// A page shorter than minSplitPage or not of whole doubles is one block
	// run as before: the same bytes as a codec without byteStreams, less
	// the Huffman coding of blocks without a match, so at most as large.
	short := page[:minSplitPage-8]
	a, b := enc(&zstdCodec{level: zstd.SpeedDefault, byteStreams: true}, short), enc(&zstdCodec{level: zstd.SpeedDefault}, short)
	if a > b {
		t.Errorf("a %d-byte page: %.0f bytes with byteStreams, %.0f without", len(short), a*n, b*n)
	}
}
