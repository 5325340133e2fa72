package media

import (
	"bytes"
	"encoding/binary"
	"image"
	_ "image/jpeg"
	_ "image/png"
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
