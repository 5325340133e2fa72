package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"mime/multipart"
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// made is a real item of the shape of virtual item v: its bytes made,
// then read back as a request carries them.
func made(t *testing.T, v trace.Media) trace.Media {
	t.Helper()
	b, err := media.Make(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	it, err := api.ReadItem(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if it.Hash != hex.EncodeToString(sum[:]) || it.Bytes != int64(len(b)) || it.Data != string(b) {
		t.Fatalf("read %s: hash %s, %d bytes", v.Format, it.Hash, it.Bytes)
	}
	return it
}

// Each API's request parser reads back the media its encoder wrote:
// kind, format, shape, size, hash and bytes.
func TestParseMedia(t *testing.T) {
	png := made(t, trace.Media{Kind: trace.MediaImage, Format: "png", Width: 40, Height: 30, Seed: 1})
	jpg := made(t, trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 64, Height: 48, Seed: 2})
	wav := made(t, trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 250, Seed: 3})
	mp4 := made(t, trace.Media{Kind: trace.MediaVideo, Format: "mp4", Width: 32, Height: 32, Frames: 3, Seed: 4})
	if png.Width != 40 || png.Height != 30 || jpg.Format != "jpeg" || wav.DurationMs != 250 || mp4.Frames != 3 || mp4.Kind != trace.MediaVideo {
		t.Fatalf("probed shapes: %+v %+v %+v %+v", png, jpg, wav, mp4)
	}
	req := api.Request{Model: "m", MaxTokens: 4}
	images := []trace.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "look", Media: []trace.Media{png, jpg}}}
	all := []trace.Message{{Role: "user", Content: "see and hear", Media: []trace.Media{png, mp4, wav, jpg}}}

	chatBody := chat.AppendRequestTail(chat.AppendRequestMessage(chat.AppendRequestHead(nil, "m"), &all[0], true), "", "", &chat.RequestOptions{})
	for _, c := range []struct {
		name  string
		body  []byte
		parse func([]byte) (*api.Call, error)
		want  []trace.Message
	}{
		{"chat", chatBody, chat.ParseRequest, all},
		{"responses", responses.AppendRequest(nil, &req, nil, images), responses.ParseRequest, images},
		{"messages", messages.AppendRequest(nil, &req, nil, images), messages.ParseRequest, images},
	} {
		call, err := c.parse(c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(call.Messages, c.want) || len(call.SkippedMedia) != 0 {
			t.Errorf("%s: parsed %+v (skipped %v)", c.name, call.Messages, call.SkippedMedia)
		}
	}
}

// Parts whose bytes the request does not hold, or no server reads, are
// counted with the reason, never the URL; the text stays.
func TestParseMediaSkipped(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png?sig=SECRET"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n cut")) + `"}}]}]}`
	c, err := chat.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 1 || c.Messages[0].Content != "hi" || len(c.Messages[0].Media) != 0 || len(c.SkippedMedia) != 3 {
		t.Fatalf("%+v, skipped %v", c.Messages, c.SkippedMedia)
	}
	if !errors.Is(c.SkippedMedia[0], api.ErrRemoteMedia) {
		t.Errorf("by URL: %v", c.SkippedMedia[0])
	}
	for _, e := range c.SkippedMedia {
		if strings.Contains(e.Error(), "SECRET") || strings.Contains(e.Error(), "example.com") || !strings.Contains(e.Error(), "image_url part") {
			t.Errorf("reason %q", e)
		}
	}
	c, err = messages.ParseRequest([]byte(`{"model":"m","max_tokens":3,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y"}},{"type":"text","text":"t"}]}]}`))
	if err != nil || len(c.SkippedMedia) != 1 || !errors.Is(c.SkippedMedia[0], api.ErrRemoteMedia) {
		t.Fatalf("messages by URL: %+v %v", c, err)
	}
}

// A speech-to-text upload reads back as one user message with its audio
// and prompt: tracekit's own body, and one a client writes with a
// boundary of its own and fields in another order.
func TestParseTranscription(t *testing.T) {
	wav := made(t, trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 400, Seed: 5})
	msgs := []trace.Message{{Role: "user", Content: "names: Ada", Media: []trace.Media{wav}}}
	body := transcription.AppendRequest(nil, &api.Request{Model: "whisper", MaxTokens: 30}, msgs)
	c, err := transcription.ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "whisper" || !c.Stream || c.MaxTokens != 30 || !reflect.DeepEqual(c.Messages, msgs) {
		t.Fatalf("%+v", c)
	}

	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	w.WriteField("model", "openai/whisper-large-v3")
	w.WriteField("response_format", "verbose_json")
	f, _ := w.CreateFormFile("file", "clip.wav")
	f.Write([]byte(wav.Data))
	w.WriteField("language", "de")
	w.Close()
	c, err = transcription.ParseRequest(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "openai/whisper-large-v3" || c.Stream || len(c.Messages) != 1 || c.Messages[0].Content != "" ||
		len(c.Messages[0].Media) != 1 || c.Messages[0].Media[0] != wav {
		t.Fatalf("%+v", c)
	}

	for name, bad := range map[string]string{
		"no boundary":   "model=x",
		"no file":       "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nx\r\n--b--\r\n",
		"not audio":     "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\n\r\nID3\x03junk\r\n--b--\r\n",
		"cut multipart": "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nx",
	} {
		if _, err := transcription.ParseRequest([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
