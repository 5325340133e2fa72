package media

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

func made(t *testing.T, m trace.Media) []byte {
	t.Helper()
	b, err := Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bytes a server could not open are refused with what is wrong: not a
// known format, an image whose data is cut (its header alone still
// reads), a WAV or MP4 cut short.
func TestProbeRefuses(t *testing.T) {
	png := made(t, trace.Media{Kind: "image", Format: "png", Width: 64, Height: 64, Seed: 1})
	jpg := made(t, trace.Media{Kind: "image", Format: "jpeg", Width: 64, Height: 64, Seed: 1})
	wav := made(t, trace.Media{Kind: "audio", Format: "wav", DurationMs: 100, Seed: 1})
	mp4 := made(t, trace.Media{Kind: "video", Format: "mp4", Width: 32, Height: 32, Frames: 3, Seed: 1})
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"text", []byte("hello, world"), "not an image, video or audio"},
		{"empty", nil, "not an image"},
		{"png cut", png[:len(png)/2], "png image of 64x64 does not decode"},
		{"jpeg cut", jpg[:len(jpg)/2], "jpeg image of 64x64 does not decode"},
		{"png header cut", png[:20], "png image header"},
		{"wav cut", wav[:len(wav)-10], "cut short"},
		{"wav without data", wav[:36], "no data chunk"},
		{"mp4 cut", mp4[:len(mp4)-10], "cut short"},
		{"mp4 without moov", mp4[:28], "no moov"},
	} {
		_, err := Probe(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// A made video is an MP4 that ffprobe reads as Motion JPEG at its size
// and frame count, and that ffmpeg decodes without a warning. Skipped
// where ffmpeg is not installed.
func TestVideoFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe not installed")
	}
	path := filepath.Join(t.TempDir(), "v.mp4")
	m := trace.Media{Kind: "video", Format: "mp4", Width: 96, Height: 64, Frames: 7, DurationMs: 700, Seed: 9}
	if err := os.WriteFile(path, made(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-show_entries",
		"stream=codec_name,width,height,nb_read_frames,r_frame_rate", "-of", "compact", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffprobe: %v: %s", err, out)
	}
	want := "stream|codec_name=mjpeg|width=96|height=64|r_frame_rate=10/1|nb_read_frames=7"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("ffprobe says %q, want %q", got, want)
	}
	out, err = exec.Command("ffmpeg", "-v", "warning", "-i", path, "-f", "null", "-").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("ffmpeg decoding: %v: %s", err, out)
	}
}

// Video shapes beyond the bounds are refused before any frame is made.
func TestMakeVideoRefuses(t *testing.T) {
	for _, m := range []trace.Media{
		{Kind: "video", Format: "webm", Width: 8, Height: 8, Frames: 1},
		{Kind: "video", Format: "mp4", Width: 8, Height: 8, Frames: 0},
		{Kind: "video", Format: "mp4", Width: 8, Height: 8, Frames: MaxFrames + 1},
		{Kind: "video", Format: "mp4", Width: 4096, Height: 4096, Frames: 100},
	} {
		if _, err := Make(nil, &m); err == nil {
			t.Errorf("%+v was made", m)
		}
	}
}
