package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// With MediaURLBase the requests carry URLs where replay serves each item
// (image_url and audio_url), and what the server fetches there are the
// item's bytes; the file server is gone once the runner is closed.
func TestMediaURLBase(t *testing.T) {
	items := map[string]trace.Media{} // made bytes: the item
	var turns []trace.Turn
	for i := range 3 {
		c := conv(fmt.Sprintf("u%d", i), 1, 0, 0, 2)
		ms := []trace.Media{{Kind: trace.MediaImage, Format: "jpeg", Width: 40, Height: 30, Seed: int64(-i)},
			{Kind: trace.MediaAudio, Format: "wav", DurationMs: 10, Seed: int64(i)}}
		for _, m := range ms {
			b, err := media.Make(nil, &m)
			if err != nil {
				t.Fatal(err)
			}
			items[string(b)] = m
		}
		c[0].Messages[len(c[0].Messages)-1].Media = ms
		turns = append(turns, c...)
	}
	var mu sync.Mutex
	var fetched []string
	var problems []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		for _, m := range req.Messages {
			var parts []struct {
				Type     string            `json:"type"`
				ImageURL map[string]string `json:"image_url"`
				AudioURL map[string]string `json:"audio_url"`
			}
			if json.Unmarshal(m.Content, &parts) != nil {
				continue
			}
			for _, p := range parts[1:] {
				u := p.ImageURL["url"] + p.AudioURL["url"]
				resp, err := http.Get(u)
				mu.Lock()
				if err != nil || resp.StatusCode != 200 {
					problems = append(problems, fmt.Sprintf("GET %s: %v %v", u, err, resp))
				} else {
					b, _ := io.ReadAll(resp.Body)
					if it, ok := items[string(b)]; !ok || !strings.Contains(resp.Header.Get("Content-Type"), it.Format) {
						problems = append(problems, fmt.Sprintf("%s (%s): %d bytes of no item", p.Type, u, len(b)))
					}
					resp.Body.Close()
				}
				fetched = append(fetched, p.Type)
				mu.Unlock()
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	r, err := New(Config{Targets: []string{srv.URL}, Model: "m", NoProbe: true, MediaURLBase: "http://127.0.0.1:0/media/"}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns))
	if err != nil {
		t.Fatal(err)
	}
	base := r.media.base
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.Run(ctx, &memSink{})
	if err != nil || res.Sent != 3 || res.Errors != 0 {
		t.Fatalf("%d sent, %d errors, %v", res.Sent, res.Errors, err)
	}
	r.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if len(fetched) != 6 || strings.Count(strings.Join(fetched, ","), "audio_url") != 3 {
		t.Errorf("fetched %v, want 3 image_url and 3 audio_url", fetched)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/media") {
		t.Errorf("base %q", base)
	}
	if resp, err := http.Get(base + "/image-1x1-0f-0ms-1.png"); err == nil {
		resp.Body.Close()
		t.Errorf("the media server still answers after Close")
	}
}

// An item's name is its shape and seed, read back as the same item.
func TestMediaName(t *testing.T) {
	for _, m := range []trace.Media{{Kind: trace.MediaImage, Format: "png", Width: 3, Height: 2, Seed: -9},
		{Kind: trace.MediaVideo, Format: "mp4", Width: 3, Height: 2, Frames: 8, Seed: 1 << 62},
		{Kind: trace.MediaAudio, Format: "wav", DurationMs: 250},
		{Kind: trace.MediaImage, Format: "jpeg", Hash: trace.MediaHash([]byte("x"))}} {
		got, err := parseMediaName(mediaName(&m))
		if err != nil || got != m {
			t.Errorf("%s read back as %+v, %v", mediaName(&m), got, err)
		}
	}
	for _, bad := range []string{"", "x.png", "image-3x2-0f-0ms-.png", "image-3y2-0f-0ms-1.png", "image-3x2-0f-0ms-01.png", "../etc/passwd"} {
		if _, err := parseMediaName(bad); err == nil {
			t.Errorf("%q read as an item", bad)
		}
	}
}

// A trace whose media cannot be made (an unknown format, an audio clip of
// no length, a real item whose hash is not one) is refused before the run,
// naming the conversation and turn.
func TestMediaRefusedBeforeRun(t *testing.T) {
	for _, m := range []trace.Media{{Kind: trace.MediaImage, Format: "gif", Width: 2, Height: 2},
		{Kind: trace.MediaImage, Format: "png", Hash: "ab12"},
		{Kind: trace.MediaAudio, Format: "wav"}} {
		c := conv("bad", 1, 0, 0, 2)
		c[0].Messages[len(c[0].Messages)-1].Media = []trace.Media{m}
		_, err := New(Config{Targets: []string{"http://127.0.0.1:1"}, NoProbe: true, Model: "m"}, NewMemorySource(trace.TraceMeta{}, c))
		if err == nil || !strings.Contains(err.Error(), `"bad" turn 0`) {
			t.Errorf("%+v: %v", m, err)
		}
	}
	c := conv("img", 1, 0, 0, 2)
	c[0].Messages[len(c[0].Messages)-1].Media = []trace.Media{{Kind: trace.MediaAudio, Format: "wav", DurationMs: 5}}
	_, err := New(Config{Targets: []string{"http://127.0.0.1:1"}, NoProbe: true, Model: "m", Endpoint: EndpointMessages}, NewMemorySource(trace.TraceMeta{}, c))
	if err == nil || !strings.Contains(err.Error(), "audio") || !strings.Contains(err.Error(), "messages") {
		t.Errorf("audio on messages: %v", err)
	}
}
