package mock

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

func makeMedia(t *testing.T, m trace.Media) []byte {
	t.Helper()
	b, err := media.Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dataURI(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// Media fixtures and their tokens, worked out apart from the code:
// Qwen2.5-VL images resize 256x256 to 252x252 (9x9 = 81 tokens) and
// 1280x720 to 1288x728 (46x26 = 1,196); a 64x48 video frame is scaled up
// to the video minimum, 392x280 (14x10 = 140 a slice), and its 4 frames
// are 2 slices (280); 10 s of audio is Qwen2-Audio's 25 a second (250).
type fixture struct {
	png, jpeg, mp4, wav []byte
}

const (
	pngTokens  = 81
	jpegTokens = 1196
	mp4Tokens  = 280
	wavTokens  = 250
	textTokens = 4 // "hello there"
)

func fixtures(t *testing.T) fixture {
	return fixture{
		png:  makeMedia(t, trace.Media{Kind: "image", Format: "png", Width: 256, Height: 256, Seed: 1}),
		jpeg: makeMedia(t, trace.Media{Kind: "image", Format: "jpeg", Width: 1280, Height: 720, Seed: 2}),
		mp4:  makeMedia(t, trace.Media{Kind: "video", Format: "mp4", Width: 64, Height: 48, Frames: 4, Seed: 3}),
		wav:  makeMedia(t, trace.Media{Kind: "audio", Format: "wav", DurationMs: 10_000, Seed: 4}),
	}
}

// mediaServer serves the fixtures over HTTP on loopback, and answers
// /slow only when the client gives up (bounded by the test's cleanup).
func mediaServer(t *testing.T, f fixture) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/a.png", func(w http.ResponseWriter, r *http.Request) { w.Write(f.png) })
	mux.HandleFunc("/b.jpg", func(w http.ResponseWriter, r *http.Request) { w.Write(f.jpeg) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

func chatParts(parts ...map[string]any) map[string]any {
	content := append([]map[string]any{{"type": "text", "text": "hello there"}}, parts...)
	return map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": content}}}
}

func imageURL(u string) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}}
}

// inputTokens reads a non-streamed answer's prompt tokens: chat's
// usage.prompt_tokens, Responses' usage.input_tokens, or Messages'
// input_tokens plus the cache's (which Anthropic's input_tokens leave out).
func inputTokens(t *testing.T, resp *http.Response) int {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var v struct {
		Usage struct {
			Prompt *int `json:"prompt_tokens"`
			Input  *int `json:"input_tokens"`
			Read   int  `json:"cache_read_input_tokens"`
			Write  int  `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if v.Usage.Prompt != nil {
		return *v.Usage.Prompt
	}
	if v.Usage.Input != nil {
		return *v.Usage.Input + v.Usage.Read + v.Usage.Write
	}
	t.Fatalf("no prompt tokens in %s", b)
	return 0
}

// Every API's media forms are read, and the prompt is charged the text's
// tokens plus each item's: in the answer's usage, in the log (with the
// items and their bytes) and in the planned prefill.
func TestMediaForms(t *testing.T) {
	f := fixtures(t)
	hs := mediaServer(t, f)
	srv := startMock(t, nil)
	for _, c := range []struct {
		name   string
		path   string
		body   map[string]any
		tokens int
		bytes  int
		items  int
	}{
		{"chat image data URI", "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", f.png))), pngTokens, len(f.png), 1},
		{"chat image http URL", "/v1/chat/completions", chatParts(imageURL(hs.URL + "/b.jpg")), jpegTokens, len(f.jpeg), 1},
		{"chat video", "/v1/chat/completions", chatParts(map[string]any{"type": "video_url", "video_url": map[string]any{"url": dataURI("video/mp4", f.mp4)}}), mp4Tokens, len(f.mp4), 1},
		{"chat audio", "/v1/chat/completions", chatParts(map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(f.wav), "format": "wav"}}), wavTokens, len(f.wav), 1},
		{"chat two images", "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", f.png)), imageURL(hs.URL+"/a.png")), 2 * pngTokens, 2 * len(f.png), 2},
		{"responses image data URI", "/v1/responses", map[string]any{"model": "m", "max_output_tokens": 2, "input": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "input_text", "text": "hello there"}, {"type": "input_image", "image_url": dataURI("image/png", f.png)}}}}}, pngTokens, len(f.png), 1},
		{"responses image URL", "/v1/responses", map[string]any{"model": "m", "max_output_tokens": 2, "input": []map[string]any{{"type": "message", "role": "user", "content": []map[string]any{
			{"type": "input_text", "text": "hello there"}, {"type": "input_image", "image_url": hs.URL + "/b.jpg", "detail": "auto"}}}}}, jpegTokens, len(f.jpeg), 1},
		{"messages base64 image", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(f.png)}}, {"type": "text", "text": "hello there"}}}}}, pngTokens, len(f.png), 1},
		{"messages URL image", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "hello there"}, {"type": "image", "source": map[string]any{"type": "url", "url": hs.URL + "/b.jpg"}}}}}}, jpegTokens, len(f.jpeg), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "media-" + strings.ReplaceAll(c.name, " ", "-")
			resp := post(t, srv, c.path, c.body, map[string]string{"X-Request-Id": id})
			if got, want := inputTokens(t, resp), textTokens+c.tokens; got != want {
				t.Errorf("prompt tokens %d, want %d text + %d media", got, textTokens, c.tokens)
			}
			e := entryByID(t, srv, id)
			if e.MediaItems != int32(c.items) || e.MediaTokens != int32(c.tokens) || e.MediaBytes != int64(c.bytes) || e.PromptTokens != int32(textTokens+c.tokens) {
				t.Errorf("log: %d items, %d media tokens, %d bytes, %d prompt tokens; want %d, %d, %d, %d",
					e.MediaItems, e.MediaTokens, e.MediaBytes, e.PromptTokens, c.items, c.tokens, c.bytes, textTokens+c.tokens)
			}
			// Prefill is charged for every prompt token: the planned time to
			// first token is at least the model's prefill of them all.
			if min := int64(srv.cfg.Latency.prefill(textTokens + c.tokens)); e.PlannedTTFTNs < min {
				t.Errorf("planned TTFT %d ns, below the prefill of %d tokens, %d ns", e.PlannedTTFTNs, textTokens+c.tokens, min)
			}
		})
	}
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`tracekit_mock_media_items_total{model_name="tracekit-mock"} 10`,
		fmt.Sprintf(`tracekit_mock_media_tokens_total{model_name="tracekit-mock"} %d`, 5*pngTokens+3*jpegTokens+mp4Tokens+wavTokens)} {
		if !strings.Contains(string(page), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// The same text with another image is another prompt (no prefix-cache hit
// across it); the same image again hits the cache.
func TestMediaInPrefixHash(t *testing.T) {
	f := fixtures(t)
	srv := startMock(t, nil)
	other := makeMedia(t, trace.Media{Kind: "image", Format: "png", Width: 256, Height: 256, Seed: 99})
	send := func(id string, img []byte) LogEntry {
		resp := post(t, srv, "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", img))), map[string]string{"X-Request-Id": id})
		inputTokens(t, resp)
		return entryByID(t, srv, id)
	}
	a, b, c := send("a", f.png), send("b", other), send("c", f.png)
	if a.MessagesHash == b.MessagesHash {
		t.Errorf("another image gave the same messages hash %s", a.MessagesHash)
	}
	if a.MessagesHash != c.MessagesHash || c.CachedTokens == 0 {
		t.Errorf("the same image again: hash %s (first %s), %d cached tokens", c.MessagesHash, a.MessagesHash, c.CachedTokens)
	}
	if b.CachedTokens != 0 {
		t.Errorf("another image hit the cache for %d tokens", b.CachedTokens)
	}
}

// Media a server cannot load are a 400 naming the part and what is wrong,
// logged as a bad request; nothing is generated for them.
func TestMediaRejected(t *testing.T) {
	f := fixtures(t)
	hs := mediaServer(t, f)
	srv := startMock(t, func(c *Config) { c.MediaFetchTimeout = Duration(200 * time.Millisecond) })
	b64 := base64.StdEncoding.EncodeToString
	for _, c := range []struct {
		name string
		path string
		body map[string]any
		want string
	}{
		{"bad base64", "/v1/chat/completions", chatParts(imageURL("data:image/png;base64,iVBOR!!w0K")), "messages[0].content[1].image_url: invalid base64 at character 5"},
		{"png cut", "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", f.png[:len(f.png)/2]))), "png image of 256x256 does not decode"},
		{"not media", "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", []byte("just some text")))), "not an image, video or audio"},
		{"URL 404", "/v1/chat/completions", chatParts(imageURL(hs.URL + "/missing.png")), "HTTP 404"},
		{"URL times out", "/v1/chat/completions", chatParts(imageURL(hs.URL + "/slow")), "timed out after 200ms"},
		{"file URL", "/v1/chat/completions", chatParts(imageURL("file:///etc/passwd")), "file URLs are not served"},
		{"video as image", "/v1/chat/completions", chatParts(imageURL(dataURI("video/mp4", f.mp4))), "expected an image, the data is a video mp4"},
		{"mp3 audio", "/v1/chat/completions", chatParts(map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": b64(f.wav), "format": "mp3"}}), "is not read by the mock (wav is)"},
		{"audio cut", "/v1/chat/completions", chatParts(map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": b64(f.wav[:1000]), "format": "wav"}}), "cut short"},
		{"image_url without url", "/v1/chat/completions", chatParts(map[string]any{"type": "image_url", "image_url": map[string]any{}}), "messages[0].content[1].image_url: expected"},
		{"responses bad image", "/v1/responses", map[string]any{"model": "m", "max_output_tokens": 2, "input": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "input_image", "image_url": dataURI("image/png", f.png[:100])}}}}}, "input[0].content[0].input_image"},
		{"messages bad base64", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "not base64"}}}}}}, "messages.0.content.0.source: invalid base64"},
		{"messages URL 404", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "url", "url": hs.URL + "/nothing"}}}}}}, "HTTP 404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "bad-" + strings.ReplaceAll(c.name, " ", "-")
			resp := post(t, srv, c.path, c.body, map[string]string{"X-Request-Id": id})
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !strings.Contains(string(b), c.want) {
				t.Errorf("status %d, body %s; want 400 saying %q", resp.StatusCode, b, c.want)
			}
			if e := entryByID(t, srv, id); e.Outcome != OutcomeBadRequest || e.CompletionTokens != 0 {
				t.Errorf("logged %s with %d completion tokens", e.Outcome, e.CompletionTokens)
			}
		})
	}
}

// With MediaCheck header an image is checked by its header alone: one cut
// short past its header is served (its media tokens from its size), one
// without a readable header is still a 400. With the default the cut one
// is refused (TestMediaRejected).
func TestMediaCheckHeader(t *testing.T) {
	f := fixtures(t)
	srv := startMock(t, func(c *Config) { c.MediaCheck = MediaCheckHeader })
	cut := f.png[:len(f.png)/2]
	resp := post(t, srv, "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", cut))), map[string]string{"X-Request-Id": "cut"})
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("a PNG cut past its header, header check: status %d %s", resp.StatusCode, b)
	}
	info, err := media.ProbeHeader(cut)
	if err != nil {
		t.Fatal(err)
	}
	want, err := media.Tokens(info)
	if err != nil {
		t.Fatal(err)
	}
	if e := entryByID(t, srv, "cut"); e.MediaItems != 1 || e.MediaTokens != int32(want) {
		t.Errorf("logged %d items, %d media tokens; want 1, %d", e.MediaItems, e.MediaTokens, want)
	}
	resp = post(t, srv, "/v1/chat/completions", chatParts(imageURL(dataURI("image/png", []byte("just some text")))), nil)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "not an image, video or audio") {
		t.Errorf("not media, header check: status %d %s", resp.StatusCode, b)
	}
	if _, err := media.Probe(cut); err == nil {
		t.Error("the full check passes the cut PNG")
	}
}

// A log of schema version 3, before the media columns, reads with them 0.
func TestLogV3ReadsWithoutMedia(t *testing.T) {
	rt := reflect.TypeFor[LogEntry]()
	var fields []reflect.StructField
	var idx []int
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if name == "-" || strings.HasPrefix(name, "media_") {
			continue
		}
		fields, idx = append(fields, f), append(idx, i)
	}
	v3 := reflect.StructOf(fields)
	path := filepath.Join(t.TempDir(), "v3.parquet")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(file, parquet.SchemaOf(reflect.New(v3).Interface()),
		parquet.KeyValueMetadata(trace.MetaFormat, FormatLog),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, "3"),
		parquet.KeyValueMetadata(MetaLog, `{"url":"http://old"}`))
	src := LogEntry{RequestID: "old-1", Endpoint: "chat", PromptTokens: 12, EventMonoNs: []int64{5}, EventTokens: []int32{1}, EventLatenessNs: []int64{0}}
	row := reflect.New(v3).Elem()
	for k, i := range idx {
		row.Field(k).Set(reflect.ValueOf(src).Field(i))
	}
	if err := w.Write(row.Addr().Interface()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	rows, meta, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RequestID != "old-1" || rows[0].PromptTokens != 12 || rows[0].MediaItems != 0 || rows[0].MediaTokens != 0 || meta.URL != "http://old" {
		t.Errorf("read %+v, meta %+v", rows, meta)
	}
}
