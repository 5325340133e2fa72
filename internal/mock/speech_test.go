package mock

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// speechBody is a transcription request uploading a clip of ms milliseconds.
func speechBody(t *testing.T, ms int32, stream bool) []byte {
	t.Helper()
	m := trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: ms, Seed: 1}
	b, err := media.Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	m.Data = string(b)
	return transcription.AppendRequest(nil, &api.Request{Model: "m", MaxTokens: 8, NonStreaming: !stream},
		[]trace.Message{{Role: "user", Content: "a meeting", Media: []trace.Media{m}}})
}

// A clip is charged as the media token rule says, so a longer clip takes
// longer to prefill; vLLM's body reports its duration in whole seconds.
func TestSpeechPrefillAndBody(t *testing.T) {
	srv := startMock(t, nil)
	var ttft [2]int64 // prompt tokens: what the latency model prefills
	for i, ms := range []int32{1000, 2500} {
		resp := post(t, srv, "/v1/audio/transcriptions", string(speechBody(t, ms, false)),
			map[string]string{"Content-Type": transcription.ContentType, "X-Request-Id": "s" + string(rune('0'+i))})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Text  string
			Usage struct {
				Type    string
				Seconds int
			}
		}
		if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != 200 || body.Text == "" || body.Usage.Type != "duration" || body.Usage.Seconds != int(ms+999)/1000 {
			t.Fatalf("HTTP %d %s (%v): want a transcript and %d seconds", resp.StatusCode, b, err, (ms+999)/1000)
		}
		e := entryByID(t, srv, "s"+string(rune('0'+i)))
		wantTokens := media.AudioTokensFromFrames(int(ms) * media.AudioTokenRate / 1000 / media.AudioHop)
		if e.Endpoint != trace.EndpointTranscriptions || e.MediaItems != 1 || int(e.MediaTokens) != wantTokens || e.PromptTokens <= e.MediaTokens || e.ReasoningTokens != 0 {
			t.Errorf("log: %+v, want one clip of %d tokens and the prompt's text", e, wantTokens)
		}
		ttft[i] = int64(e.PromptTokens)
	}
	if ttft[1] <= ttft[0] {
		t.Errorf("prompt tokens %v: a longer clip is a longer prompt to prefill", ttft)
	}
}

// What vLLM refuses, the mock refuses with a 400 naming the field.
func TestSpeechBadRequests(t *testing.T) {
	srv := startMock(t, nil)
	form := func(fields string) string {
		return "--" + transcription.Boundary + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n" + fields + "--" + transcription.Boundary + "--\r\n"
	}
	field := func(k, v string) string {
		return "--" + transcription.Boundary + "\r\nContent-Disposition: form-data; name=\"" + k + "\"\r\n\r\n" + v + "\r\n"
	}
	for _, c := range []struct {
		body, ct, want string
	}{
		{`{"model":"m"}`, "application/json", "multipart/form-data"},
		{form(""), transcription.ContentType, "file is required"},
		{form(field("file", "not a file")), transcription.ContentType, "file upload"},
		{strings.Replace(string(speechBody(t, 500, false)), "response_format\"\r\n\r\njson", "response_format\"\r\n\r\nsrt", 1), transcription.ContentType, "json only"},
		{strings.Replace(string(speechBody(t, 500, false)), "name=\"model\"\r\n\r\nm", "name=\"stream_include_usage\"\r\n\r\ntrue", 1), transcription.ContentType, "stream=True"},
	} {
		resp := post(t, srv, "/v1/audio/translations", c.body, map[string]string{"Content-Type": c.ct})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
			t.Errorf("HTTP %d %s, want 400 saying %q", resp.StatusCode, b, c.want)
		}
	}
}
