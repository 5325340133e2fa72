package chat

import (
	"encoding/json"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a /v1/chat/completions request body (the inverse of
// AppendRequest): its messages as they are (a content of another shape
// records as no text; its image_url, video_url, audio_url and input_audio
// parts are the message's media, api.ReadDataURI), max_completion_tokens or else max_tokens, stream,
// tools and tool_choice as compact JSON text.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model               string            `json:"model"`
		Messages            []chatmsg.Message `json:"messages"`
		Tools               json.RawMessage   `json:"tools"`
		ToolChoice          json.RawMessage   `json:"tool_choice"`
		MaxTokens           *int32            `json:"max_tokens"`
		MaxCompletionTokens *int32            `json:"max_completion_tokens"`
		Stream              bool              `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model, Conversation: true, Stream: req.Stream,
		Tools: api.CompactJSON(req.Tools), ToolChoice: api.CompactJSON(req.ToolChoice)}
	switch {
	case req.MaxCompletionTokens != nil:
		c.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.MaxTokens = *req.MaxTokens
	}
	c.Messages = make([]trace.Message, 0, len(req.Messages))
	for i := range req.Messages {
		msg, _ := req.Messages[i].Decode()
		partsMedia(c, &msg, req.Messages[i].Content)
		c.Messages = append(c.Messages, msg)
	}
	return c, nil
}

// part is a content part that may carry media: image_url, video_url and
// audio_url (an object with a url, or the url itself, as some clients
// send it), or input_audio's base64 data.
type part struct {
	Type       string          `json:"type"`
	ImageURL   json.RawMessage `json:"image_url"`
	VideoURL   json.RawMessage `json:"video_url"`
	AudioURL   json.RawMessage `json:"audio_url"`
	InputAudio *struct {
		Data string `json:"data"`
	} `json:"input_audio"`
}

// partsMedia keeps the media of a content given as a list of parts in
// msg, in order (c.KeepMedia): replay sends them after the text, as its
// encoder writes every message with media.
func partsMedia(c *api.Call, msg *trace.Message, content json.RawMessage) {
	if len(content) == 0 || content[0] != '[' {
		return
	}
	var parts []part
	if json.Unmarshal(content, &parts) != nil {
		return
	}
	for _, p := range parts {
		var url json.RawMessage
		switch p.Type {
		case "image_url":
			url = p.ImageURL
		case "video_url":
			url = p.VideoURL
		case "audio_url":
			url = p.AudioURL
		case "input_audio":
			if p.InputAudio != nil {
				it, err := api.ReadBase64(p.InputAudio.Data)
				c.KeepMedia(msg, p.Type, it, err)
			}
			continue
		default:
			continue
		}
		it, err := api.ReadDataURI(partURL(url))
		c.KeepMedia(msg, p.Type, it, err)
	}
}

// partURL is a part's url: {"url": u} or the string u.
func partURL(raw json.RawMessage) string {
	var o struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(raw, &o) == nil && o.URL != "" {
		return o.URL
	}
	var s string
	json.Unmarshal(raw, &s)
	return s
}
