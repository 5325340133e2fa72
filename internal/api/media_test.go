package api_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/trace"
)

// Each API carries a message's images after its text, in its own shape,
// the item's bytes base64-encoded.
func TestMediaParts(t *testing.T) {
	img := trace.Media{Kind: trace.MediaImage, Format: "png", Width: 2, Height: 2, Data: "\x89PNG-bytes"}
	b64 := base64.StdEncoding.EncodeToString([]byte(img.Data))
	msgs := []trace.Message{{Role: "user", Content: "look", Media: []trace.Media{img}}}
	req := api.Request{Model: "m", MaxTokens: 4}

	var c struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	body := chat.AppendRequestTail(chat.AppendRequestMessage(chat.AppendRequestHead(nil, "m"), &msgs[0], true), "", "", &chat.RequestOptions{})
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("chat: %v: %s", err, body)
	}
	if p := c.Messages[0].Content; len(p) != 2 || p[0]["text"] != "look" || p[1]["image_url"].(map[string]any)["url"] != "data:image/png;base64,"+b64 {
		t.Errorf("chat content %v", p)
	}

	var r struct {
		Input []struct {
			Content []map[string]any `json:"content"`
		} `json:"input"`
	}
	body = responses.AppendRequest(nil, &req, nil, msgs)
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("responses: %v: %s", err, body)
	}
	if p := r.Input[0].Content; len(p) != 2 || p[0]["type"] != "input_text" || p[1]["type"] != "input_image" || p[1]["image_url"] != "data:image/png;base64,"+b64 {
		t.Errorf("responses content %v", p)
	}

	var m struct {
		Messages []struct {
			Content []struct {
				Type   string            `json:"type"`
				Text   string            `json:"text"`
				Source map[string]string `json:"source"`
			} `json:"content"`
		} `json:"messages"`
	}
	body = messages.AppendRequest(nil, &req, nil, msgs)
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("messages: %v: %s", err, body)
	}
	if p := m.Messages[0].Content; len(p) != 2 || p[0].Text != "look" || p[1].Type != "image" ||
		p[1].Source["type"] != "base64" || p[1].Source["media_type"] != "image/png" || p[1].Source["data"] != b64 {
		t.Errorf("messages content %+v", p)
	}
}

// A body built from the base64 a reader encoded ahead is the body built
// from the bytes, and a stale or wrong Base64 is not checked here: the
// reader that sets it owns it (replay's look-ahead sets both at once).
func TestAppendBase64Ahead(t *testing.T) {
	data := string([]byte{0, 1, 2, 0xfe, 0xff, 'a', 'b'})
	raw := trace.Media{Kind: trace.MediaImage, Format: "png", Data: data}
	ahead := raw
	ahead.Base64 = base64.StdEncoding.EncodeToString([]byte(data))
	if a, b := string(api.AppendDataURI(nil, &raw)), string(api.AppendDataURI(nil, &ahead)); a != b || !strings.HasPrefix(a, `"data:image/png;base64,`) {
		t.Errorf("from the bytes %s, from the base64 made ahead %s", a, b)
	}
	ahead.Base64 = "AAAA"
	if got := string(api.AppendBase64(nil, &ahead)); got != "AAAA" {
		t.Errorf("AppendBase64 = %q, want the base64 made ahead", got)
	}
}
