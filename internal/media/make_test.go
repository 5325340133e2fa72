package media

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	_ "image/png"
	"math/rand/v2"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// Every made image decodes with the standard library at its size, and the
// same item makes the same bytes while another seed makes others.
func TestMakeImages(t *testing.T) {
	for _, f := range []string{"png", "jpeg"} {
		m := trace.Media{Kind: trace.MediaImage, Format: f, Width: 64, Height: 48, Seed: 3}
		a, err := Make(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(a))
		if err != nil || format != f || cfg.Width != 64 || cfg.Height != 48 {
			t.Fatalf("%s: decoded %s %dx%d, %v", f, format, cfg.Width, cfg.Height, err)
		}
		b, _ := Make([]byte("prefix"), &m)
		if !bytes.Equal(b[6:], a) {
			t.Errorf("%s: the same item made other bytes", f)
		}
		m.Seed = 4
		if c, _ := Make(nil, &m); bytes.Equal(c, a) {
			t.Errorf("%s: another seed made the same bytes", f)
		}
	}
}

// A made JPEG is the standard encoder's encoding of the item's pixels as
// an *image.NRGBA (the bytes JPEG items were first made as), and takes a
// handful of allocations, not one a pixel: Make hands the encoder an
// *image.RGBA of the same bytes, which it reads directly.
func TestMakeJPEGIsTheNRGBAEncoding(t *testing.T) {
	for _, m := range []trace.Media{
		{Kind: trace.MediaImage, Format: "jpeg", Width: 256, Height: 256, Seed: 11},
		{Kind: trace.MediaImage, Format: "jpeg", Width: 333, Height: 77, Seed: 12},
	} {
		r := rand.New(rand.NewPCG(uint64(m.Seed), 0x6d65646961))
		img := image.NewNRGBA(image.Rect(0, 0, int(m.Width), int(m.Height)))
		for i := 0; i < len(img.Pix); i += 4 {
			v := r.Uint32()
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = byte(v), byte(v>>8), byte(v>>16), 0xff
		}
		var want bytes.Buffer
		if err := jpeg.Encode(&want, img, &jpeg.Options{Quality: JPEGQuality}); err != nil {
			t.Fatal(err)
		}
		got, err := Make(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%dx%d: made %d bytes that differ from the NRGBA encoding's %d", m.Width, m.Height, len(got), want.Len())
		}
	}
	m := trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 256, Height: 256, Seed: 13}
	buf := make([]byte, 0, 1<<20)
	if n := testing.AllocsPerRun(3, func() { buf, _ = Make(buf[:0], &m) }); n > 100 {
		t.Errorf("making a 256x256 JPEG took %.0f allocations, want a few (not one a pixel)", n)
	}
}

// A WAV clip has the header of 16-bit mono PCM at AudioRate and exactly
// the samples its duration holds.
func TestMakeWAV(t *testing.T) {
	m := trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 1500, Seed: 1}
	b, err := Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || binary.LittleEndian.Uint32(b[24:]) != AudioRate || string(b[36:40]) != "data" {
		t.Fatalf("header % x", b[:44])
	}
	if n := binary.LittleEndian.Uint32(b[40:]); n != 2*AudioRate*3/2 || len(b) != 44+int(n) {
		t.Fatalf("data chunk of %d bytes in a file of %d, want %d samples", n, len(b), AudioRate*3/2)
	}
}

// Shapes Make cannot make are refused with the field named, before any
// memory is taken for them.
func TestMakeRefuses(t *testing.T) {
	for _, m := range []trace.Media{
		{Kind: trace.MediaImage, Format: "gif", Width: 1, Height: 1},
		{Kind: trace.MediaImage, Format: "png", Width: 100000, Height: 100000},
		{Kind: trace.MediaImage, Format: "png", Width: 0, Height: 5},
		{Kind: trace.MediaAudio, Format: "wav", DurationMs: 0},
		{Kind: trace.MediaAudio, Format: "wav", DurationMs: MaxDurationMs + 1},
		{Kind: "hologram"},
		{Kind: trace.MediaImage, Format: "png", Width: 2, Height: 2, Hash: "ab"},
	} {
		if b, err := Make(nil, &m); err == nil || len(b) != 0 {
			t.Errorf("%+v: made %d bytes, err %v", m, len(b), err)
		}
	}
}

// MakeYielding makes Make's bytes and yields between small steps of the
// work: once per 64 Ki pixels or samples made and once per buffered write
// of encoded output, so a megapixel's encoding gives its CPU away well
// over a hundred times.
func TestMakeYielding(t *testing.T) {
	for _, c := range []struct {
		m   trace.Media
		min func(size int) int // fewest yields for an output of size bytes
	}{
		{trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 1024, Height: 1024, Seed: 5}, func(n int) int { return 16 + n/4096 }},
		{trace.Media{Kind: trace.MediaImage, Format: "png", Width: 512, Height: 512, Seed: 6}, func(n int) int { return 4 + n/(32<<10) }},
		{trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 9000, Seed: 7}, func(int) int { return 3 }},
		{trace.Media{Kind: trace.MediaVideo, Format: "mp4", Width: 320, Height: 240, Frames: 3, Seed: 8}, func(n int) int { return 3 * 2 }},
	} {
		want, err := Make(nil, &c.m)
		if err != nil {
			t.Fatal(err)
		}
		yields := 0
		got, err := MakeYielding(nil, &c.m, func() { yields++ })
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s %s: MakeYielding made other bytes than Make (%d against %d), %v", c.m.Kind, c.m.Format, len(got), len(want), err)
		}
		if lo := c.min(len(got)); yields < lo {
			t.Errorf("%s %s of %d bytes: %d yields, want at least %d", c.m.Kind, c.m.Format, len(got), yields, lo)
		}
	}
}
