package calibrate

import (
	"context"
	"testing"
	"time"
)

// A small media comparison against the mock in this process: every text
// event is matched in both runs, every media request is sent with its
// image and none fails, and each body's send time is recorded.
func TestRunMediaSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replays")
	}
	rep, err := RunMedia(context.Background(), MediaConfig{Streams: 5, EventsPerS: 100, Duration: 2 * time.Second, Requests: 20, Bytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ImageBytes < 60<<10 || rep.ImageBytes > 70<<10 {
		t.Errorf("the image is %d bytes, want about 64 KiB", rep.ImageBytes)
	}
	for name, r := range map[string]MediaRun{"alone": rep.Alone, "with media": rep.WithMedia} {
		if r.Matched == 0 || r.Matched != r.EventsServer || r.Errors != 0 {
			t.Errorf("%s: %d of %d text events matched, %d failed requests", name, r.Matched, r.EventsServer, r.Errors)
		}
	}
	if r := rep.Alone; r.MediaSent != 0 {
		t.Errorf("alone: %d media requests", r.MediaSent)
	}
	if r := rep.WithMedia; r.MediaSent != 20 || r.MediaErrors != 0 || r.MediaBodyBytes < 20*int64(rep.ImageBytes)*4/3 || r.SendMaxNs <= 0 {
		t.Errorf("with media: %d sent, %d failed, %d body bytes, send max %d ns", r.MediaSent, r.MediaErrors, r.MediaBodyBytes, r.SendMaxNs)
	}
	if _, err := RunMedia(context.Background(), MediaConfig{Bytes: 100 << 20}); err == nil {
		t.Error("a 100 MiB image was accepted")
	}
}
