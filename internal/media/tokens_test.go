package media

import (
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// The worked Qwen2/2.5-VL counts, computed apart from this code with
// smart_resize as transformers writes it, at the processor's default
// max_pixels (1,003,520) and at 12,845,056.
func TestImageTokensWorked(t *testing.T) {
	for _, c := range []struct {
		h, w               int
		rh, rw, tok        int
		bigH, bigW, bigTok int
	}{
		{256, 256, 252, 252, 81, 252, 252, 81},
		{336, 336, 336, 336, 144, 336, 336, 144},
		{448, 448, 448, 448, 256, 448, 448, 256},
		{512, 512, 504, 504, 324, 504, 504, 324},
		{720, 1280, 728, 1288, 1196, 728, 1288, 1196},
		{1024, 1024, 980, 980, 1225, 1036, 1036, 1369},
		{1080, 1920, 728, 1316, 1222, 1092, 1932, 2691},
		{2080, 2080, 980, 980, 1225, 2072, 2072, 5476},
		// Below min_pixels: scaled up and ceiled to 56x56.
		{10, 10, 56, 56, 4, 56, 56, 4},
		// 42/28 = 1.5 rounds to even (2), 70/28 = 2.5 too (2).
		{42, 70, 56, 56, 4, 56, 56, 4},
		{100, 5000, 112, 5012, 716, 112, 5012, 716},
	} {
		h, w, err := SmartResize(c.h, c.w, ImageMinPixels, ImageMaxPixels)
		if err != nil || h != c.rh || w != c.rw {
			t.Errorf("%dx%d: resized to %dx%d (%v), want %dx%d", c.h, c.w, h, w, err, c.rh, c.rw)
		}
		if n, err := Tokens(Info{Kind: trace.MediaImage, Height: c.h, Width: c.w}); err != nil || n != c.tok {
			t.Errorf("%dx%d: %d tokens (%v), want %d", c.h, c.w, n, err, c.tok)
		}
		h, w, _ = SmartResize(c.h, c.w, ImageMinPixels, 12845056)
		if h != c.bigH || w != c.bigW || (h/28)*(w/28) != c.bigTok {
			t.Errorf("%dx%d at 12,845,056: resized to %dx%d, want %dx%d (%d tokens)", c.h, c.w, h, w, c.bigH, c.bigW, c.bigTok)
		}
	}
	if _, err := Tokens(Info{Kind: trace.MediaImage, Height: 10, Width: 2100}); err == nil {
		t.Error("an image 210 times wider than high was given tokens; smart_resize refuses it")
	}
}

// Video frames use the video processor's bounds (100,352 to 602,112
// pixels), one slice per 2 frames, of at most 32 sampled frames.
func TestVideoTokensWorked(t *testing.T) {
	for _, c := range []struct {
		h, w, frames, tok int
	}{
		{720, 1280, 16, 8 * 20 * 36},  // resized to 560x1008
		{720, 1280, 1, 1 * 20 * 36},   // one frame padded to a slice
		{256, 256, 3, 2 * 12 * 12},    // scaled up to 336x336; 3 frames, 2 slices
		{240, 320, 100, 16 * 10 * 14}, // 280x392; 32 of the 100 frames
	} {
		if n, err := Tokens(Info{Kind: trace.MediaVideo, Height: c.h, Width: c.w, Frames: c.frames}); err != nil || n != c.tok {
			t.Errorf("%dx%d x%d: %d tokens (%v), want %d", c.h, c.w, c.frames, n, err, c.tok)
		}
	}
}

// Audio takes Qwen2-Audio's 25 tokens a second, cut at 30 s.
func TestAudioTokensWorked(t *testing.T) {
	for _, c := range []struct {
		samples int64
		rate    int
		tok     int
	}{
		{30 * 16000, 16000, 750},
		{10 * 16000, 16000, 250},
		{24000, 16000, 37}, // 150 frames -> 75 -> 37
		{60 * 16000, 16000, 750},
		{10 * 8000, 8000, 250}, // resampled to 16 kHz first
		{160, 16000, 0},
	} {
		if n, err := Tokens(Info{Kind: trace.MediaAudio, Samples: c.samples, SampleRate: c.rate}); err != nil || n != c.tok {
			t.Errorf("%d samples at %d Hz: %d tokens (%v), want %d", c.samples, c.rate, n, err, c.tok)
		}
	}
}

// Made items probe back as what they were made as, and their tokens
// follow from that.
func TestProbeMade(t *testing.T) {
	for _, c := range []struct {
		m    trace.Media
		want Info
		tok  int
	}{
		{trace.Media{Kind: "image", Format: "png", Width: 256, Height: 256, Seed: 1},
			Info{Kind: "image", Format: "png", Width: 256, Height: 256}, 81},
		{trace.Media{Kind: "image", Format: "jpeg", Width: 1280, Height: 720, Seed: 2},
			Info{Kind: "image", Format: "jpeg", Width: 1280, Height: 720}, 1196},
		{trace.Media{Kind: "audio", Format: "wav", DurationMs: 10_000, Seed: 3},
			Info{Kind: "audio", Format: "wav", Duration: 10 * time.Second, Samples: 160000, SampleRate: 16000}, 250},
		{trace.Media{Kind: "video", Format: "mp4", Width: 320, Height: 240, Frames: 5, Seed: 4},
			Info{Kind: "video", Format: "mp4", Width: 320, Height: 240, Frames: 5, Duration: 5 * time.Second / 30}, 3 * 10 * 14},
		{trace.Media{Kind: "video", Format: "mp4", Width: 64, Height: 48, Frames: 4, DurationMs: 2000, Seed: 4},
			Info{Kind: "video", Format: "mp4", Width: 64, Height: 48, Frames: 4, Duration: 2 * time.Second}, 2 * 10 * 14},
	} {
		b, err := Make(nil, &c.m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Probe(b)
		if err != nil || got != c.want {
			t.Errorf("%+v: probed %+v (%v), want %+v", c.m, got, err, c.want)
		}
		if n, err := Tokens(got); err != nil || n != c.tok {
			t.Errorf("%+v: %d tokens (%v), want %d", c.m, n, err, c.tok)
		}
	}
}
