package capture_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// mediaMarker is written into every media item the tests send (a PNG
// text chunk, a JPEG comment, a WAV LIST chunk: parts a reader skips), so
// a file holding any original bytes is found by it.
const mediaMarker = "PRIVATE-PIXELS-OF-A-USER-5d1e"

// mediaItems are the items the media tests send, their bytes as sent.
type mediaItems struct{ png, jpeg, wav []byte }

func makeItem(t *testing.T, m trace.Media) []byte {
	t.Helper()
	b, err := media.Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newMediaItems(t *testing.T) mediaItems {
	png := makeItem(t, trace.Media{Kind: trace.MediaImage, Format: "png", Width: 64, Height: 48, Seed: 11})
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(mediaMarker)))
	chunk = append(chunk, "tEXt"+mediaMarker...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	png = slices.Concat(png[:33], chunk, png[33:]) // after the signature and IHDR

	jpg := makeItem(t, trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 80, Height: 56, Seed: 12})
	com := binary.BigEndian.AppendUint16([]byte{0xff, 0xfe}, uint16(2+len(mediaMarker)))
	jpg = slices.Concat(jpg[:2], com, []byte(mediaMarker), jpg[2:]) // a comment after SOI

	wav := makeItem(t, trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 700, Seed: 13})
	list := binary.LittleEndian.AppendUint32([]byte("LIST"), uint32(len(mediaMarker)+len(mediaMarker)%2))
	list = append(list, mediaMarker...)
	if len(mediaMarker)%2 == 1 {
		list = append(list, 0)
	}
	wav = slices.Concat(wav[:36], list, wav[36:]) // after the fmt chunk
	binary.LittleEndian.PutUint32(wav[4:], uint32(len(wav)-8))
	return mediaItems{png: png, jpeg: jpg, wav: wav}
}

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func dataURI(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// sendMedia sends, to base, requests with media on every API that
// carries them: a chat with an image of each format and an audio clip, a
// second chat with the PNG again, a Messages and a Responses request with
// an image each, and a speech-to-text upload of the clip. Each must
// succeed.
func sendMedia(t *testing.T, base string, it mediaItems) {
	t.Helper()
	post := func(path, ctype string, body []byte) {
		t.Helper()
		resp, err := http.Post(base+path, ctype, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s: %s", path, resp.Status, b)
		}
	}
	postJSON := func(path string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		post(path, "application/json", b)
	}
	type obj = map[string]any
	image := func(mime string, b []byte) obj {
		return obj{"type": "image_url", "image_url": obj{"url": dataURI(mime, b)}}
	}
	postJSON("/v1/chat/completions", obj{"model": "tracekit-mock", "stream": true, "max_tokens": 4, "messages": []obj{{"role": "user", "content": []obj{
		{"type": "text", "text": "what do these show?"}, image("image/png", it.png), image("image/jpeg", it.jpeg),
		{"type": "input_audio", "input_audio": obj{"data": base64.StdEncoding.EncodeToString(it.wav), "format": "wav"}}}}}})
	postJSON("/v1/chat/completions", obj{"model": "tracekit-mock", "stream": true, "max_tokens": 4, "messages": []obj{{"role": "user", "content": []obj{
		{"type": "text", "text": "and this one again?"}, image("image/png", it.png)}}}})
	postJSON("/v1/messages", obj{"model": "tracekit-mock", "stream": true, "max_tokens": 4, "messages": []obj{{"role": "user", "content": []obj{
		{"type": "text", "text": "describe it"}, {"type": "image", "source": obj{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(it.png)}}}}}})
	postJSON("/v1/responses", obj{"model": "tracekit-mock", "stream": true, "max_output_tokens": 4, "input": []obj{{"role": "user", "content": []obj{
		{"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": dataURI("image/jpeg", it.jpeg)}}}}})

	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	f, _ := w.CreateFormFile("file", "meeting.wav")
	f.Write(it.wav)
	for _, kv := range [][2]string{{"model", "tracekit-mock"}, {"language", "en"}, {"response_format", "json"}, {"stream", "true"}} {
		w.WriteField(kv[0], kv[1])
	}
	w.Close()
	post("/v1/audio/transcriptions", w.FormDataContentType(), form.Bytes())
}

// captureMedia captures sendMedia's requests in front of the mock, with
// or without redaction, and returns the segment, the mock's log and the
// proxy's log.
func captureMedia(t *testing.T, it mediaItems, redactContent bool) (capture.Segment, []mock.LogEntry, string) {
	t.Helper()
	up := quickMock(t)
	var mu sync.Mutex
	var logs strings.Builder
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default(), RedactContent: redactContent,
		Logf: func(f string, a ...any) { mu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); mu.Unlock() }}, "")
	if err != nil {
		t.Fatal(err)
	}
	sendMedia(t, ps.URL(), it)
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 1 || segs[0].Requests != 5 {
		t.Fatalf("segments %+v", segs)
	}
	mu.Lock()
	defer mu.Unlock()
	return segs[0], up.Log(), logs.String()
}

// byEndpoint is the captured turns of each endpoint ("" for chat), in
// arrival order.
func byEndpoint(t *testing.T, path string) map[string][]trace.Turn {
	rows := readTurns(t, path)
	slices.SortFunc(rows, func(a, b trace.Turn) int { return int(a.ArrivalOffsetNs - b.ArrivalOffsetNs) })
	out := map[string][]trace.Turn{}
	for _, r := range rows {
		out[r.Endpoint] = append(out[r.Endpoint], r)
	}
	return out
}

// turnMedia is a turn's media items, all messages in order.
func turnMedia(r trace.Turn) []trace.Media {
	var out []trace.Media
	for _, m := range r.Messages {
		out = append(out, m.Media...)
	}
	return out
}

// mediaTokens is the mock log's (endpoint, items, media tokens) of each
// request with media, sorted: what a replay must reproduce (replay's
// usage probe carries none).
func mediaTokens(log []mock.LogEntry) []string {
	var out []string
	for _, e := range log {
		if e.MediaItems == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d items, %d media tokens", e.Endpoint, e.MediaItems, e.MediaTokens))
	}
	slices.Sort(out)
	return out
}

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir string, s []byte) []string {
	t.Helper()
	var out []string
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		if b, err := os.ReadFile(p); err != nil {
			t.Error(err)
		} else if bytes.Contains(b, s) {
			out = append(out, p)
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("no files in %s", dir)
	}
	return out
}

// Under --redact every item becomes a virtual one of the same kind,
// format and shape, equal items alike; no byte of the originals is in any
// file; the captured trace replayed against the mock costs the same media
// tokens, request by request.
func TestCaptureRedactsMedia(t *testing.T) {
	it := newMediaItems(t)
	seg, upLog, log := captureMedia(t, it, true)
	if seg.Media != "" {
		t.Errorf("a redacted capture wrote a media file %s", seg.Media)
	}
	dir := filepath.Dir(seg.Trace)
	for _, s := range []string{mediaMarker, base64.StdEncoding.EncodeToString(it.png[40:100]), base64.StdEncoding.EncodeToString(it.wav[200:260])} {
		if files := filesHolding(t, dir, []byte(s)); len(files) > 0 {
			t.Errorf("original media bytes in %v", files)
		}
	}
	rows := byEndpoint(t, seg.Trace)
	virtual := func(m trace.Media, kind, format string, w, h, ms int32) {
		t.Helper()
		if m.Hash != "" || m.Bytes != 0 || m.Seed == 0 || m.Kind != kind || m.Format != format || m.Width != w || m.Height != h || m.DurationMs != ms {
			t.Errorf("%+v: want a virtual %s %s %dx%d %d ms", m, format, kind, w, h, ms)
		}
	}
	chat := rows[""]
	if len(chat) != 2 || len(turnMedia(chat[0])) != 3 || len(turnMedia(chat[1])) != 1 {
		t.Fatalf("chat turns %+v", chat)
	}
	first := turnMedia(chat[0])
	virtual(first[0], trace.MediaImage, "png", 64, 48, 0)
	virtual(first[1], trace.MediaImage, "jpeg", 80, 56, 0)
	virtual(first[2], trace.MediaAudio, "wav", 0, 0, 700)
	pngAgain, msgs, resp, stt := turnMedia(chat[1]), rows[trace.EndpointMessages], rows[trace.EndpointResponses], rows[trace.EndpointTranscriptions]
	if len(msgs) != 1 || len(resp) != 1 || len(stt) != 1 {
		t.Fatalf("turns by endpoint %+v", rows)
	}
	// the same image is the same synthetic image, wherever it was sent
	if pngAgain[0] != first[0] || turnMedia(msgs[0])[0] != first[0] || turnMedia(resp[0])[0] != first[1] || turnMedia(stt[0])[0] != first[2] {
		t.Errorf("equal items made unequal: %+v %+v %+v %+v", pngAgain, turnMedia(msgs[0]), turnMedia(resp[0]), turnMedia(stt[0]))
	}
	if first[0].Seed == first[1].Seed || first[0].Seed == first[2].Seed {
		t.Errorf("distinct items share a seed: %+v", first)
	}
	if stt[0].Messages[0].Content != "" || stt[0].NonStreaming {
		t.Errorf("speech-to-text turn %+v", stt[0])
	}
	if strings.Contains(log, "not recorded") {
		t.Errorf("log:\n%s", log)
	}

	target := quickMock(t)
	for _, g := range replayTo(t, seg.Trace, target.URL()) {
		if g.ErrorKind != "" {
			t.Fatalf("replayed request failed: %+v", g)
		}
	}
	if got, want := mediaTokens(target.Log()), mediaTokens(upLog); !slices.Equal(got, want) {
		t.Errorf("replay's media tokens\n%s\nwant the capture's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// How near the synthetic items' sizes come: the clip exactly, but for
	// the LIST chunk it does not make; images are of noise pixels.
	sizes := map[string][2]int64{}
	for _, e := range upLog {
		if e.MediaItems == 0 {
			continue
		}
		sizes[fmt.Sprint(e.Endpoint, e.MediaItems)] = [2]int64{e.MediaBytes, 0}
	}
	for _, e := range target.Log() {
		if e.MediaItems == 0 {
			continue
		}
		k := fmt.Sprint(e.Endpoint, e.MediaItems)
		sizes[k] = [2]int64{sizes[k][0], e.MediaBytes}
	}
	for k, s := range sizes {
		t.Logf("%s: %d bytes sent in capture, %d replayed", k, s[0], s[1])
	}
	if s := sizes[fmt.Sprint(trace.EndpointTranscriptions, 1)]; s[0]-s[1] != int64(8+len(mediaMarker)+len(mediaMarker)%2) {
		t.Errorf("speech-to-text clip of %d bytes replayed as %d, want the same less its LIST chunk", s[0], s[1])
	}
}

// Captured media are kept by hash, their bytes stored once each in the
// media file beside the trace (the PNG was sent three times), and nowhere
// else; each item has the kind, format and shape of what was sent; the
// captured trace replayed sends the same items again.
func TestCaptureStoresMedia(t *testing.T) {
	it := newMediaItems(t)
	seg, upLog, log := captureMedia(t, it, false)
	if seg.Media != trace.MediaPath(seg.Trace) {
		t.Fatalf("media file %q, want %q", seg.Media, trace.MediaPath(seg.Trace))
	}
	real := func(m trace.Media, sent []byte, kind, format string, w, h, ms int32) {
		t.Helper()
		if m.Hash != hashOf(sent) || m.Bytes != int64(len(sent)) || m.Seed != 0 || m.Kind != kind || m.Format != format ||
			m.Width != w || m.Height != h || m.DurationMs != ms {
			t.Errorf("%+v: want the %s %s of %d bytes, %dx%d, %d ms, hash %s", m, format, kind, len(sent), w, h, ms, hashOf(sent))
		}
	}
	rows := byEndpoint(t, seg.Trace)
	chat, msgs, resp, stt := rows[""], rows[trace.EndpointMessages], rows[trace.EndpointResponses], rows[trace.EndpointTranscriptions]
	if len(chat) != 2 || len(msgs) != 1 || len(resp) != 1 || len(stt) != 1 {
		t.Fatalf("turns by endpoint %+v", rows)
	}
	first := turnMedia(chat[0])
	if len(first) != 3 || len(turnMedia(chat[1])) != 1 || len(turnMedia(msgs[0])) != 1 || len(turnMedia(resp[0])) != 1 || len(turnMedia(stt[0])) != 1 {
		t.Fatalf("media per turn: %+v", rows)
	}
	real(first[0], it.png, trace.MediaImage, "png", 64, 48, 0)
	real(first[1], it.jpeg, trace.MediaImage, "jpeg", 80, 56, 0)
	real(first[2], it.wav, trace.MediaAudio, "wav", 0, 0, 700)
	real(turnMedia(chat[1])[0], it.png, trace.MediaImage, "png", 64, 48, 0)
	real(turnMedia(msgs[0])[0], it.png, trace.MediaImage, "png", 64, 48, 0)
	real(turnMedia(resp[0])[0], it.jpeg, trace.MediaImage, "jpeg", 80, 56, 0)
	real(turnMedia(stt[0])[0], it.wav, trace.MediaAudio, "wav", 0, 0, 700)
	if m := stt[0].Messages; len(m) != 1 || m[0].Role != "user" || m[0].Content != "" || stt[0].NonStreaming || stt[0].Model != "tracekit-mock" {
		t.Errorf("speech-to-text turn %+v", stt[0])
	}
	if chat[0].Messages[0].Content != "what do these show?" {
		t.Errorf("chat text %q", chat[0].Messages[0].Content)
	}

	store, err := trace.OpenMediaFile(seg.Media)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if store.Len() != 3 || store.Bytes() != int64(len(it.png)+len(it.jpeg)+len(it.wav)) {
		t.Errorf("media file holds %d items of %d bytes, want the 3 distinct ones, once each", store.Len(), store.Bytes())
	}
	for _, sent := range [][]byte{it.png, it.jpeg, it.wav} {
		if b, err := store.Load(hashOf(sent)); err != nil || !bytes.Equal(b, sent) {
			t.Errorf("item %s: %d bytes, %v", hashOf(sent), len(b), err)
		}
	}
	if files := filesHolding(t, filepath.Dir(seg.Trace), []byte(mediaMarker)); !slices.Equal(files, []string{seg.Media}) {
		t.Errorf("the media bytes are in %v, want only the media file", files)
	}
	if strings.Contains(log, "not recorded") {
		t.Errorf("log:\n%s", log)
	}

	// Replayed against the mock, every request sends the same items:
	// the same media tokens and bytes, the marker in each body.
	target := quickMock(t)
	for _, g := range replayTo(t, seg.Trace, target.URL()) {
		if g.ErrorKind != "" {
			t.Fatalf("replayed request failed: %+v", g)
		}
	}
	withBytes := func(log []mock.LogEntry) []string {
		var out []string
		for _, e := range log {
			if e.MediaItems == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %d items, %d media tokens, %d bytes", e.Endpoint, e.MediaItems, e.MediaTokens, e.MediaBytes))
			if !bytes.Contains(e.Body, []byte(mediaMarker)) && !bytes.Contains(e.Body, []byte(base64.StdEncoding.EncodeToString(it.png[:60]))) &&
				!bytes.Contains(e.Body, []byte(base64.StdEncoding.EncodeToString(it.jpeg[:60]))) {
				t.Errorf("%s request body carries none of the items sent", e.Endpoint)
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := withBytes(target.Log()), withBytes(upLog); len(want) != 5 || !slices.Equal(got, want) {
		t.Errorf("replay's media\n%s\nwant the capture's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A media part the request holds no bytes of (an image by URL, which the
// server fetches) is not recorded: its turn is, without it; the log says
// so once, without the URL, and Close counts them.
func TestCaptureSkipsMediaByURL(t *testing.T) {
	png := newMediaItems(t).png
	const secret = "sig=URL-SIGNATURE-0c4e"
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(png) }))
	defer files.Close()
	up := quickMock(t)
	var mu sync.Mutex
	var logs strings.Builder
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default(),
		Logf: func(f string, a ...any) { mu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); mu.Unlock() }}, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		b, _ := json.Marshal(map[string]any{"model": "tracekit-mock", "max_tokens": 3, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": fmt.Sprintf("look %d", i)}, {"type": "image_url", "image_url": map[string]any{"url": files.URL + "/a.png?" + secret}}}}}})
		resp, err := http.Post(ps.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upstream answered %s", resp.Status)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	rows := readTurns(t, seg.Trace)
	if len(rows) != 2 || len(turnMedia(rows[0])) != 0 || len(turnMedia(rows[1])) != 0 || !strings.HasPrefix(rows[0].Messages[0].Content, "look") || seg.Media != "" {
		t.Fatalf("captured %+v, media file %q", rows, seg.Media)
	}
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if strings.Count(log, "a media part is not recorded: a image_url part: given by URL") != 1 ||
		!strings.Contains(log, "2 media parts of requests were not recorded") || strings.Contains(log, secret) {
		t.Errorf("log:\n%s", log)
	}
	if found := filesHolding(t, filepath.Dir(seg.Trace), []byte(secret)); len(found) > 0 {
		t.Errorf("the URL is in %v", found)
	}
}

// A conversation whose first turn sent an image sends it again in its
// history: the trace keeps the image on the first turn only, and the
// replayed second turn carries it in its history as the client's did.
func TestCaptureMediaInHistory(t *testing.T) {
	it := newMediaItems(t)
	up := quickMock(t)
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	type obj = map[string]any
	msgs := []obj{{"role": "user", "content": []obj{{"type": "text", "text": "what is this?"},
		{"type": "image_url", "image_url": obj{"url": dataURI("image/jpeg", it.jpeg)}}}}}
	for turn := range 2 {
		b, _ := json.Marshal(obj{"model": "tracekit-mock", "max_tokens": 4, "messages": msgs})
		resp, err := http.Post(ps.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body.Choices) != 1 {
			t.Fatalf("turn %d: %s", turn, resp.Status)
		}
		msgs = append(msgs, obj{"role": "assistant", "content": body.Choices[0].Message.Content}, obj{"role": "user", "content": "and its colours?"})
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	rows := readTurns(t, seg.Trace)
	if len(rows) != 2 || rows[1].Turn != 1 || rows[1].ConversationID != rows[0].ConversationID ||
		len(turnMedia(rows[0])) != 1 || turnMedia(rows[0])[0].Hash != hashOf(it.jpeg) || len(turnMedia(rows[1])) != 0 {
		t.Fatalf("captured %+v", rows)
	}
	target := quickMock(t)
	for _, g := range replayTo(t, seg.Trace, target.URL()) {
		if g.ErrorKind != "" {
			t.Fatalf("replayed request failed: %+v", g)
		}
	}
	if got, want := mediaTokens(target.Log()), mediaTokens(up.Log()); len(want) != 2 || !slices.Equal(got, want) {
		t.Errorf("replay's media tokens\n%s\nwant the capture's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A capture killed (SIGKILL) after requests with media leaves its items'
// bytes in its trace journal, once per content: recover stores them in
// the media file beside the recovered trace, which replays against the
// mock as the capture's traffic went, and removes what the killed process
// left of its own media file.
func TestCaptureMediaSIGKILLRecover(t *testing.T) {
	it := newMediaItems(t)
	up := quickMock(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRACEKIT_PROXY_CHILD="+dir, "TRACEKIT_PROXY_UPSTREAM="+up.URL())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("child said %q (%v)", line, err)
	}
	sendMedia(t, strings.TrimSpace(line), it)
	// Kill once the trace journal holds the 5 turns and the 3 distinct
	// items (a loaded machine may take longer than any fixed wait).
	var turns, items int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if turns, items = traceJournalFrames(t, dir); turns >= 5 && items >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the trace journal holds %d turns and %d media items, want 5 and 3", turns, items)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	res, err := record.RecoverAll(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var tr string
	for _, r := range res {
		if r.Trace {
			tr = r.Out
			if r.Records != 5 || r.MediaItems != 3 || r.MediaBytes != int64(len(it.png)+len(it.jpeg)+len(it.wav)) {
				t.Errorf("recovered %+v: want 5 turns and the 3 distinct items", r)
			}
		}
	}
	if tr == "" {
		t.Fatalf("no trace recovered: %+v", res)
	}
	store, err := trace.OpenMediaFile(trace.MediaPath(tr))
	if err != nil {
		t.Fatal(err)
	}
	for _, sent := range [][]byte{it.png, it.jpeg, it.wav} {
		if b, err := store.Load(hashOf(sent)); err != nil || !bytes.Equal(b, sent) {
			t.Errorf("item %s: %d bytes, %v", hashOf(sent), len(b), err)
		}
	}
	store.Close()
	if files := filesHolding(t, dir, []byte(mediaMarker)); !slices.Equal(files, []string{trace.MediaPath(tr)}) {
		t.Errorf("after recovery the media bytes are in %v, want only the media file", files)
	}
	target := quickMock(t)
	for _, g := range replayTo(t, tr, target.URL()) {
		if g.ErrorKind != "" {
			t.Fatalf("replayed request failed: %+v", g)
		}
	}
	if got, want := mediaTokens(target.Log()), mediaTokens(up.Log()); len(want) != 5 || !slices.Equal(got, want) {
		t.Errorf("replay's media %v, want the capture's %v", got, want)
	}
}

// traceJournalFrames counts the turn and media frames of the trace
// journals in dir.
func traceJournalFrames(t *testing.T, dir string) (turns, items int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		br := bufio.NewReader(f)
		if trace.SniffJournal(br) == trace.TraceJournalMagic {
			if jr, err := trace.NewJournalReader(br, p, trace.TraceJournalMagic); err == nil {
				for {
					b, _, err := jr.Frame()
					if err != nil {
						break
					}
					switch b[0] {
					case trace.FrameTurn:
						turns++
					case trace.FrameMedia:
						items++
					}
				}
			}
		}
		f.Close()
	}
	return turns, items
}
