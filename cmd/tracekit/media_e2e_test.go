package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// chatParts is the content of a chat request's messages, as far as media
// go.
type chatParts struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
	InputAudio struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
}

// synth --images --audio-seconds writes virtual media on every user
// message; replay makes them and sends them after the text as data URIs
// (image_url) and input_audio, the bytes those media.Make makes of the
// trace's items; the recording counts them and times the send.
func TestMediaSynthReplayEndToEnd(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "trace.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--conversations", "3", "--turns", "2", "--input-tokens", "20", "--output-tokens", "4",
		"--images", "2", "--image-size", "64x48,32x32", "--image-format", "png", "--audio-seconds", "250ms", "--seed", "7", "-o", tr)
	if code != ExitOK {
		t.Fatalf("synth: exit %d\n%s%s", code, stdout, stderr)
	}
	turns, _, err := trace.ReadTurns(tr)
	if err != nil {
		t.Fatal(err)
	}
	// every item the trace holds, by its data as sent, to find what the
	// server got
	want := map[string]trace.Media{}
	for _, tu := range turns {
		n := 0
		for _, m := range tu.Messages {
			for _, it := range m.Media {
				b, err := media.Make(nil, &it)
				if err != nil {
					t.Fatal(err)
				}
				want[base64.StdEncoding.EncodeToString(b)] = it
				n++
			}
		}
		if n != 3 {
			t.Fatalf("turn %s/%d carries %d media items, want 2 images and an audio clip", tu.ConversationID, tu.Turn, n)
		}
	}

	var mu sync.Mutex
	var problems []string
	got := map[string]int{} // kind: parts received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		var req chatParts
		if err := json.Unmarshal(body, &req); err != nil {
			problems = append(problems, "body is not JSON: "+err.Error())
		}
		for _, m := range req.Messages {
			if m.Role != "user" {
				continue
			}
			var parts []chatPart
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				problems = append(problems, "user content is not a list of parts: "+string(m.Content[:min(len(m.Content), 80)]))
				continue
			}
			if len(parts) != 4 || parts[0].Type != "text" || parts[0].Text == "" {
				problems = append(problems, fmt.Sprintf("want a text part then 3 media parts, got %d parts, first %q", len(parts), parts[0].Type))
				continue
			}
			for _, p := range parts[1:] {
				var data, kind string
				switch p.Type {
				case "image_url":
					mime, b64, ok := strings.Cut(strings.TrimPrefix(p.ImageURL.URL, "data:"), ";base64,")
					if !ok || mime != "image/png" {
						problems = append(problems, "image_url is not a PNG data URI: "+p.ImageURL.URL[:min(len(p.ImageURL.URL), 40)])
					}
					data, kind = b64, trace.MediaImage
				case "input_audio":
					if p.InputAudio.Format != "wav" {
						problems = append(problems, "input_audio format "+p.InputAudio.Format)
					}
					data, kind = p.InputAudio.Data, trace.MediaAudio
				default:
					problems = append(problems, "unexpected part "+p.Type)
					continue
				}
				it, ok := want[data]
				if !ok || it.Kind != kind {
					problems = append(problems, fmt.Sprintf("a %s part whose bytes are no item of the trace", p.Type))
				}
				got[kind]++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)

	rec := filepath.Join(dir, "rec.parquet")
	stdout, stderr, code = runCLI(t, "replay", tr, "--target", srv.URL, "-o", rec, "--no-probe", "--model", "m",
		"--progress", "none", "--no-analyze")
	if code != ExitOK {
		t.Fatalf("replay: exit %d\n%s%s", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	// turn 2 sends turn 1's media again in its history: 3 conversations
	// x (1 + 2) user messages, each with 2 images and an audio clip
	if got[trace.MediaImage] != 18 || got[trace.MediaAudio] != 9 {
		t.Errorf("the server got %v parts, want 18 images and 9 audio clips", got)
	}
	recs, _, err := trace.ReadRecords(rec)
	if err != nil || len(recs) != 6 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.ErrorKind != "" {
			t.Errorf("%s: error %s: %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
		// what the request carried: the media of its turn and the turns
		// before it (its history)
		var wantItems int32
		var bytes int64
		for _, tu := range turns {
			if tu.ConversationID == r.ConversationID && tu.Turn <= r.Turn {
				for _, m := range tu.Messages {
					for _, it := range m.Media {
						b, _ := media.Make(nil, &it)
						bytes += int64(len(b))
						wantItems++
					}
				}
			}
		}
		if r.MediaItems != wantItems || r.MediaBytes != bytes || r.RequestBytes <= r.MediaBytes*4/3 {
			t.Errorf("%s: media_items %d (turn %d; want %d) media_bytes %d (want %d) request_bytes %d", r.RequestID, r.MediaItems, r.Turn, wantItems, r.MediaBytes, bytes, r.RequestBytes)
		}
		if r.WriteStartNs <= 0 || r.WriteStartNs > r.SentNs || r.SentNs > r.DoneNs {
			t.Errorf("%s: write_start_ns %d sent_ns %d done_ns %d: want 0 < write start <= sent <= done", r.RequestID, r.WriteStartNs, r.SentNs, r.DoneNs)
		}
	}
}

// Media an endpoint cannot carry, and absurd shapes, are refused before
// anything is written, naming the flag (and the endpoint).
func TestSynthMediaRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--endpoint", "completions", "--images", "1"}, []string{"--images", "completions"}},
		{[]string{"--endpoint", "messages", "--audio-seconds", "1"}, []string{"--audio-seconds", "messages"}},
		{[]string{"--endpoint", "responses", "--videos", "1"}, []string{"--videos", "responses"}},
		{[]string{"--endpoint", "embeddings", "--images", "1"}, []string{"--images", "embeddings"}},
		{[]string{"--images", "1", "--image-size", "100000x100000"}, []string{"--image-size", "100000x100000"}},
		{[]string{"--images", "1", "--image-size", "12x"}, []string{"--image-size"}},
		{[]string{"--images", "1", "--image-format", "gif"}, []string{"--image-format", "gif"}},
		{[]string{"--videos", "1", "--video-frames", "0"}, []string{"--video-frames"}},
		{[]string{"--image-size", "64x64"}, []string{"--image-size", "--images"}},
	} {
		out := filepath.Join(t.TempDir(), "t.parquet")
		_, stderr, code := runCLI(t, append([]string{"synth", "--conversations", "2", "-o", out}, c.args...)...)
		if code != ExitUsage {
			t.Errorf("synth %v: exit %d, want %d\n%s", c.args, code, ExitUsage, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("synth %v: message does not name %q: %s", c.args, w, stderr)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("synth %v wrote %s", c.args, out)
		}
	}
}

// Media are virtual in a trace (a seed and a shape): 10,000 requests with
// two 1024x1024 images each stay under 2 MB, and the same flags and seed
// give the same items.
func TestSynthMediaTraceStaysSmall(t *testing.T) {
	dir := t.TempDir()
	var paths [2]string
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("t%d.parquet", i))
		stdout, stderr, code := runCLI(t, "synth", "--conversations", "10000", "--turns", "1", "--input-tokens", "8", "--output-tokens", "8",
			"--images", "2", "--image-size", "1024x1024", "--seed", "3", "-o", paths[i])
		if code != ExitOK {
			t.Fatalf("synth: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= 2<<20 {
		t.Errorf("the trace is %d bytes, want under 2 MB", st.Size())
	}
	a, _, err := trace.ReadTurns(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := trace.ReadTurns(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 10000 || len(b) != len(a) {
		t.Fatalf("%d and %d requests, want 10000", len(a), len(b))
	}
	seeds := map[int64]bool{}
	for i := range a {
		ma, mb := a[i].Messages[len(a[i].Messages)-1].Media, b[i].Messages[len(b[i].Messages)-1].Media
		if len(ma) != 2 || !slices.Equal(ma, mb) {
			t.Fatalf("request %d: media %+v and %+v, want the same two images", i, ma, mb)
		}
		for _, m := range ma {
			if m.Kind != trace.MediaImage || m.Format != "jpeg" || m.Width != 1024 || m.Height != 1024 {
				t.Fatalf("request %d: item %+v, want a 1024x1024 jpeg image", i, m)
			}
			seeds[m.Seed] = true
		}
	}
	if len(seeds) != 20000 {
		t.Errorf("%d distinct seeds among 20000 images", len(seeds))
	}
}

// --from-vllm with vLLM's random-mm dataset: the text of its random
// dataset, and per request the images and videos its sampler draws:
// base 3, ratio 0, limits image 1 video 2 make every request exactly one
// image (a (h 40, w 60) bucket: 60 wide) and two 8-frame videos; it is
// sent on chat, as vLLM's openai-chat backend does.
func TestSynthFromVLLMRandomMM(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mm.parquet")
	line := `vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --dataset-name random-mm --num-prompts 50 ` +
		`--random-input-len 32 --random-output-len 8 --random-mm-base-items-per-request 3 ` +
		`--random-mm-limit-mm-per-prompt '{"image": 1, "video": 2}' --random-mm-bucket-config '{(40, 60, 1): 0.9, (16, 16, 8): 0.1}'`
	stdout, stderr, code := runCLI(t, "synth", "--from-vllm", line, "-o", out)
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	rows, _, err := trace.ReadTurns(out)
	if err != nil || len(rows) != 50 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		items := r.Messages[len(r.Messages)-1].Media
		img, vid := 0, 0
		for _, it := range items {
			switch {
			case it.Kind == trace.MediaImage && it.Width == 60 && it.Height == 40 && it.Format == "jpeg":
				img++
			case it.Kind == trace.MediaVideo && it.Width == 16 && it.Height == 16 && it.Frames == 8 && it.Format == "mp4":
				vid++
			default:
				t.Fatalf("%s: item %+v of no bucket", r.ConversationID, it)
			}
		}
		if img != 1 || vid != 2 {
			t.Fatalf("%s: %d images and %d videos, want 1 and 2", r.ConversationID, img, vid)
		}
	}
	if !strings.Contains(stdout, "--endpoint chat") {
		t.Errorf("the replay command printed does not send on chat:\n%s", stdout)
	}
	_, stderr, code = runCLI(t, "synth", "--from-vllm", "vllm bench serve --dataset-name random-mm", "-o", filepath.Join(t.TempDir(), "x.parquet"))
	if code != ExitUsage || !strings.Contains(stderr, "openai-chat") {
		t.Errorf("random-mm on the completions backend: exit %d: %s", code, stderr)
	}
}

// synth -> replay -> analyze with images, video and audio against the
// mock: every request succeeds; the recording's media by kind are the
// trace's (history included), equal to what the mock logged; the media
// tokens the mock's usage reported by kind add up to its log, which is
// the formula's (media.Tokens of each item); analyze's media section shows
// the same counts, bytes and tokens, and TTFT by media items and bytes
// over every completed stream.
func TestMediaAnalyzeAgainstMock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	dir := t.TempDir()
	tr, rec, js, txt := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.txt")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "4", "--turns", "2", "--input-tokens", "16", "--output-tokens", "6", "--rate", "0",
		"--images", "2", "--image-size", "64x48,96x96", "--image-format", "png", "--videos", "1", "--video-size", "56x56", "--video-frames", "4",
		"--audio-seconds", "500ms", "--seed", "11", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	turns, _, err := trace.ReadTurns(tr)
	if err != nil {
		t.Fatal(err)
	}
	// per request (conversation, turn): the items it sends by kind, their
	// bytes and the formula's tokens
	type sent struct {
		items, bytes, tokens [3]int64
	}
	kinds := map[string]int{trace.MediaImage: 0, trace.MediaVideo: 1, trace.MediaAudio: 2}
	want := map[string]*sent{}
	for _, r := range turns {
		w := &sent{}
		for _, tu := range turns {
			if tu.ConversationID != r.ConversationID || tu.Turn > r.Turn {
				continue
			}
			for _, m := range tu.Messages {
				for _, it := range m.Media {
					b, err := media.Make(nil, &it)
					if err != nil {
						t.Fatal(err)
					}
					info, err := media.Probe(b)
					if err != nil {
						t.Fatal(err)
					}
					n, err := media.Tokens(info)
					if err != nil {
						t.Fatal(err)
					}
					k := kinds[it.Kind]
					w.items[k]++
					w.bytes[k] += int64(len(b))
					w.tokens[k] += int64(n)
				}
			}
		}
		want[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)] = w
	}
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none"); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	recs, _, err := trace.ReadRecords(rec)
	if err != nil || len(recs) != len(turns) {
		t.Fatalf("%d records of %d turns, %v", len(recs), len(turns), err)
	}
	logs := map[string]mock.LogEntry{}
	for _, e := range srv.Log() {
		logs[e.RequestID] = e
	}
	var total struct{ items, bytes, tokens int64 }
	var byKind sent
	for _, r := range recs {
		w, e := want[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)], logs[r.RequestID]
		got := sent{items: [3]int64{int64(r.ImageItems), int64(r.VideoItems), int64(r.AudioItems)},
			bytes:  [3]int64{r.ImageBytes, r.VideoBytes, r.AudioBytes},
			tokens: [3]int64{int64(r.ImageTokens), int64(r.VideoTokens), int64(r.AudioTokens)}}
		switch {
		case r.ErrorKind != "":
			t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
		case w == nil || got != *w:
			t.Errorf("%s: recorded by kind %+v, the trace's %+v", r.RequestID, got, w)
		case e.MediaItems != r.MediaItems || e.MediaBytes != r.MediaBytes || int64(e.MediaTokens) != got.tokens[0]+got.tokens[1]+got.tokens[2]:
			t.Errorf("%s: the mock logged %d items %d bytes %d tokens; recorded %d items %d bytes, tokens by kind %v",
				r.RequestID, e.MediaItems, e.MediaBytes, e.MediaTokens, r.MediaItems, r.MediaBytes, got.tokens)
		}
		total.items += int64(e.MediaItems)
		total.bytes += e.MediaBytes
		total.tokens += int64(e.MediaTokens)
		for k := range byKind.items {
			byKind.items[k] += got.items[k]
			byKind.bytes[k] += got.bytes[k]
			byKind.tokens[k] += got.tokens[k]
		}
	}
	stdout, stderr, code := runCLI(t, "analyze", rec, "--json", js)
	if code != ExitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	os.WriteFile(txt, []byte(stdout), 0o644)
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tracekit struct {
			Completed int
			Media     *struct {
				Requests     int
				Items, Bytes int64
				KindsKnown   bool                `json:"kinds_known"`
				Send         struct{ Count int } `json:"send_time"`
				Kinds        []struct {
					Kind                 string
					Requests             int
					Items, Bytes, Tokens int64
					TokensReported       int `json:"tokens_reported"`
				}
				ByItems []struct{ Requests int } `json:"ttft_by_items"`
				ByBytes []struct{ Requests int } `json:"ttft_by_bytes"`
			}
		} `json:"tracekit"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	m := out.Tracekit.Media
	if m == nil {
		t.Fatalf("no media section in the JSON:\n%s", b)
	}
	if m.Requests != len(recs) || m.Items != total.items || m.Bytes != total.bytes || !m.KindsKnown || m.Send.Count != len(recs) {
		t.Errorf("analyze's media: %d requests, %d items, %d bytes, kinds known %v, %d send times; the mock's log: %d requests, %d items, %d bytes",
			m.Requests, m.Items, m.Bytes, m.KindsKnown, m.Send.Count, len(recs), total.items, total.bytes)
	}
	if len(m.Kinds) != 3 {
		t.Fatalf("analyze's media kinds: %+v, want image, video and audio", m.Kinds)
	}
	var tokens int64
	for i, k := range m.Kinds {
		if k.Kind != [...]string{trace.MediaImage, trace.MediaVideo, trace.MediaAudio}[i] || k.Requests != len(recs) ||
			k.Items != byKind.items[i] || k.Bytes != byKind.bytes[i] || k.Tokens != byKind.tokens[i] || k.TokensReported != len(recs) {
			t.Errorf("analyze's %s: %+v; recorded %d items %d bytes %d tokens over %d requests", k.Kind, k, byKind.items[i], byKind.bytes[i], byKind.tokens[i], len(recs))
		}
		tokens += k.Tokens
	}
	if tokens != total.tokens {
		t.Errorf("analyze's media tokens %d, the mock logged %d", tokens, total.tokens)
	}
	for name, bs := range map[string][]struct{ Requests int }{"items": m.ByItems, "bytes": m.ByBytes} {
		n := 0
		for _, x := range bs {
			n += x.Requests
		}
		if n != out.Tracekit.Completed || len(bs) < 2 {
			t.Errorf("TTFT by media %s: %d buckets over %d requests, want every one of %d completed streams (turn 1 and 2 differ)", name, len(bs), n, out.Tracekit.Completed)
		}
	}
	for _, s := range []string{"Media", "Requests with media:", "body send time (ms)", "TTFT by media items (ms)", "TTFT by media bytes (ms)", "image", "video", "audio"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("the text report lacks %q:\n%s", s, stdout)
		}
	}
	if strings.Contains(stdout, "not reported by the server") {
		t.Errorf("the text report calls the media tokens unknown, the mock reported them:\n%s", stdout)
	}
}
