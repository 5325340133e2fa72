package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// mediaFixture writes real images made by internal/media under dir and
// returns their bytes by file name.
func mediaFixture(t *testing.T, dir string, files map[string]trace.Media) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, m := range files {
		b, err := media.Make(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// A LLaVA dataset of local images, imported, inspected and replayed
// against the mock (as data URIs and from replay's own file server): the
// mock decodes every image at its true size and charges the media tokens
// of its formula, and nothing fails.
func TestRealMediaImportReplayEndToEnd(t *testing.T) {
	dir := t.TempDir()
	imgs := mediaFixture(t, filepath.Join(dir, "images"), map[string]trace.Media{
		"cat.png":  {Kind: trace.MediaImage, Format: "png", Width: 320, Height: 240, Seed: 1},
		"dog.jpg":  {Kind: trace.MediaImage, Format: "jpeg", Width: 200, Height: 500, Seed: 2},
		"same.png": {Kind: trace.MediaImage, Format: "png", Width: 320, Height: 240, Seed: 1}, // cat.png again
	})
	in := filepath.Join(dir, "llava.json")
	if err := os.WriteFile(in, []byte(`[
 {"id": "a", "image": "cat.png", "conversations": [{"from": "human", "value": "<image>\nDescribe it."}, {"from": "gpt", "value": "Static."}]},
 {"id": "b", "image": ["dog.jpg", "same.png"], "conversations": [{"from": "human", "value": "<image> and <image>: same?"}, {"from": "gpt", "value": "No."}]},
 {"id": "c", "image": "same.png", "conversations": [{"from": "human", "value": "<image> again"}, {"from": "gpt", "value": "Yes."}]}
]`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "trace.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--source", "llava", "--input", in, "--image-dir", filepath.Join(dir, "images"), "-o", tr)
	if code != ExitOK {
		t.Fatalf("synth: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, trace.MediaPath(tr)+": 2 media items") {
		t.Errorf("synth did not report the media file's 2 items:\n%s", stdout)
	}
	stdout, stderr, code = runCLI(t, "inspect", tr)
	if code != ExitOK || !strings.Contains(stdout, "media file") || !strings.Contains(stdout, "2 items") || !strings.Contains(stdout, "image 2") {
		t.Errorf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, "inspect", trace.MediaPath(tr))
	if want := int64(len(imgs["cat.png"]) + len(imgs["dog.jpg"])); code != ExitOK || !strings.Contains(stdout, "2 items") || !strings.Contains(stdout, byteSize(want)) {
		t.Errorf("inspect of the media file: exit %d, want 2 items of %d bytes\n%s", code, want, stdout)
	}

	// what each request carries: its conversation's images
	want := map[string][]string{"a": {"cat.png"}, "b": {"dog.jpg", "same.png"}, "c": {"same.png"}}
	for _, base := range []string{"", "http://127.0.0.1:0/media"} {
		srv := mocktest.Start(t, func(c *mock.Config) {})
		rec := filepath.Join(t.TempDir(), "rec.parquet")
		args := []string{"replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none"}
		if base != "" {
			args = append(args, "--media-url-base", base)
		}
		if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
			t.Fatalf("replay %v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		recs, _, err := trace.ReadRecords(rec)
		if err != nil || len(recs) != 3 {
			t.Fatalf("%d records, %v", len(recs), err)
		}
		convOf := map[string]string{}
		for _, r := range recs {
			convOf[r.RequestID] = r.ConversationID
			if r.ErrorKind != "" {
				t.Errorf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
		}
		seen := 0
		for _, e := range srv.Log() {
			files, ok := want[convOf[e.RequestID]]
			if !ok {
				continue // the probe
			}
			seen++
			var bytes int64
			tokens := 0
			for _, f := range files {
				info, err := media.Probe(imgs[f])
				if err != nil {
					t.Fatal(err)
				}
				n, err := media.Tokens(info)
				if err != nil {
					t.Fatal(err)
				}
				bytes += int64(len(imgs[f]))
				tokens += n
			}
			if e.MediaItems != int32(len(files)) || e.MediaBytes != bytes || e.MediaTokens != int32(tokens) || e.Status != 200 {
				t.Errorf("url base %q, conversation %s: the mock saw %d items of %d bytes, %d media tokens (status %d); want %d of %d, %d tokens",
					base, convOf[e.RequestID], e.MediaItems, e.MediaBytes, e.MediaTokens, e.Status, len(files), bytes, tokens)
			}
		}
		if seen != 3 {
			t.Errorf("url base %q: the mock logged %d of the trace's requests, want 3", base, seen)
		}
	}
}

// A trace whose media file is gone, or lacks an item, is refused before
// anything is sent (exit 2), naming the trace, the row and the hash; a
// dataset with a missing image is refused by synth (exit 2) naming the
// file, the record and the path.
func TestRealMediaMissingExit2(t *testing.T) {
	dir := t.TempDir()
	imgs := mediaFixture(t, dir, map[string]trace.Media{"x.png": {Kind: trace.MediaImage, Format: "png", Width: 16, Height: 16, Seed: 5}})
	in := filepath.Join(dir, "mm.jsonl")
	if err := os.WriteFile(in, []byte(`{"prompt": "What is it?", "image_files": ["x.png"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "trace.parquet")
	if stdout, stderr, code := runCLI(t, "synth", "--source", "vllm-custom-mm", "--input", in, "--conversations", "2", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := os.Remove(trace.MediaPath(tr)); err != nil {
		t.Fatal(err)
	}
	srv := mocktest.Start(t, nil)
	rec := filepath.Join(dir, "rec.parquet")
	_, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none")
	hash := trace.MediaHash(imgs["x.png"])
	if code != ExitUsage || !strings.Contains(stderr, tr) || !strings.Contains(stderr, "(row 0)") || !strings.Contains(stderr, hash) || !strings.Contains(stderr, trace.MediaPath(tr)) {
		t.Errorf("replay without the media file: exit %d, want %d naming the trace, row 0 and the hash\n%s", code, ExitUsage, stderr)
	}
	if _, err := os.Stat(rec); err == nil {
		t.Error("a recording was written")
	}
	if len(srv.Log()) != 0 {
		t.Errorf("%d requests reached the server", len(srv.Log()))
	}

	// A media file whose item is not what its hash says: refused where
	// the look-ahead loads it, before it is sent (exit 2).
	w, err := trace.CreateParquet[trace.MediaItem](trace.MediaPath(tr), trace.MediaFormat)
	if err != nil {
		t.Fatal(err)
	}
	other := append([]byte(nil), imgs["x.png"]...)
	other[len(other)-20] ^= 1
	if err := w.Write(trace.MediaItem{Hash: hash, Kind: trace.MediaImage, Format: "png", Bytes: int64(len(other)), Data: other}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none")
	if code != ExitUsage || !strings.Contains(stderr, hash) || !strings.Contains(stderr, "damaged") {
		t.Errorf("replay of a damaged media file: exit %d, want %d naming the hash\n%s", code, ExitUsage, stderr)
	}
	for _, e := range srv.Log() {
		if e.MediaItems > 0 {
			t.Errorf("request %s reached the server with the damaged item", e.RequestID)
		}
	}

	if err := os.WriteFile(in, []byte(`{"prompt": "a", "image_files": ["x.png"]}`+"\n"+`{"prompt": "b", "image_files": ["gone.png"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t2.parquet")
	_, stderr, code = runCLI(t, "synth", "--source", "vllm-custom-mm", "--input", in, "--disable-shuffle", "-o", out)
	if code != ExitUsage || !strings.Contains(stderr, in) || !strings.Contains(stderr, "record 1") || !strings.Contains(stderr, "gone.png") {
		t.Errorf("synth with a missing image: exit %d, want %d naming the file, record 1 and the path\n%s", code, ExitUsage, stderr)
	}
}

// --from-vllm reads a custom_mm command line: the dataset file, its
// images, the prompts and the output length.
func TestFromVLLMCustomMM(t *testing.T) {
	dir := t.TempDir()
	mediaFixture(t, dir, map[string]trace.Media{"x.png": {Kind: trace.MediaImage, Format: "png", Width: 16, Height: 16, Seed: 5}})
	in := filepath.Join(dir, "mm.jsonl")
	if err := os.WriteFile(in, []byte(`{"prompt": "What is it?", "image_files": ["x.png"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "trace.parquet")
	line := "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --dataset-name custom_mm --dataset-path " + in +
		" --num-prompts 3 --custom-output-len 40 --model m"
	stdout, stderr, code := runCLI(t, "synth", "--from-vllm", line, "-o", tr)
	if code != ExitOK {
		t.Fatalf("synth --from-vllm: exit %d\n%s%s", code, stdout, stderr)
	}
	turns, meta, err := trace.ReadTurns(tr)
	if err != nil || len(turns) != 3 || meta.Source != "vllm-custom-mm" {
		t.Fatalf("%d turns from %s, %v", len(turns), meta.Source, err)
	}
	for _, tu := range turns {
		if tu.OutputTokens != 40 || len(tu.Messages[0].Media) != 1 || tu.Messages[0].Media[0].Width != 16 {
			t.Errorf("%s: %d output tokens, media %+v", tu.ConversationID, tu.OutputTokens, tu.Messages[0].Media)
		}
	}
	_, stderr, code = runCLI(t, "synth", "--from-vllm", strings.Replace(line, "openai-chat --endpoint /v1/chat/completions", "openai --endpoint /v1/completions", 1), "-o", filepath.Join(dir, "t2.parquet"))
	if code != ExitUsage || !strings.Contains(stderr, "custom_mm") {
		t.Errorf("custom_mm on completions: exit %d\n%s", code, stderr)
	}
}

// A trace URL whose trace carries real images brings its media file from
// beside it (or from --media-file's URL) and replays with 0 errors, the
// mock seeing every item; a media file missing there is bad input (exit 2)
// naming its URL and the turn that needs it, before anything is sent; a
// --media-file URL with a local trace is bad usage.
func TestRealMediaFromTraceURL(t *testing.T) {
	dir := t.TempDir()
	imgs := mediaFixture(t, dir, map[string]trace.Media{"x.png": {Kind: trace.MediaImage, Format: "png", Width: 64, Height: 48, Seed: 5}})
	in := filepath.Join(dir, "mm.jsonl")
	if err := os.WriteFile(in, []byte(`{"prompt": "What is it?", "image_files": ["x.png"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	served := filepath.Join(dir, "served")
	if err := os.Mkdir(served, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(served, "trace.parquet")
	if stdout, stderr, code := runCLI(t, "synth", "--source", "vllm-custom-mm", "--input", in, "--conversations", "2", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := os.Rename(trace.MediaPath(tr), filepath.Join(served, "elsewhere.media")); err != nil {
		t.Fatal(err)
	}
	files := httptest.NewServer(http.FileServer(http.Dir(served)))
	defer files.Close()
	srv := mocktest.Start(t, nil)
	replay := func(extra ...string) (string, int) {
		out := filepath.Join(t.TempDir(), "rec.parquet")
		args := append([]string{"replay", files.URL + "/trace.parquet", "--target", srv.URL(), "-o", out, "--no-analyze", "--progress", "none", "--no-probe"}, extra...)
		_, stderr, code := runCLI(t, args...)
		return stderr, code
	}

	// Not beside the trace's URL yet: refused, nothing sent.
	stderr, code := replay()
	hash := trace.MediaHash(imgs["x.png"])
	if code != ExitUsage || !strings.Contains(stderr, "media file "+files.URL+"/trace.parquet.media: the server answered 404") || !strings.Contains(stderr, hash) || !strings.Contains(stderr, "(row 0)") {
		t.Errorf("media file missing beside the trace URL: exit %d, want %d naming its URL, the hash and row 0\n%s", code, ExitUsage, stderr)
	}
	if len(srv.Log()) != 0 {
		t.Fatalf("%d requests reached the server", len(srv.Log()))
	}

	seen := 0 // log entries of earlier runs
	check := func(how string) {
		t.Helper()
		n, bytes := 0, int64(0)
		log := srv.Log()
		for _, e := range log[seen:] {
			n++
			bytes += e.MediaBytes
			if e.Status != 200 || e.MediaItems != 1 {
				t.Errorf("%s: a request got %d with %d items", how, e.Status, e.MediaItems)
			}
		}
		if n != 2 || bytes != 2*int64(len(imgs["x.png"])) {
			t.Errorf("%s: the mock saw %d requests with %d media bytes, want 2 with %d", how, n, bytes, 2*len(imgs["x.png"]))
		}
		seen = len(log)
	}
	if stderr, code := replay("--media-file", files.URL+"/elsewhere.media"); code != ExitOK {
		t.Fatalf("--media-file URL: exit %d\n%s", code, stderr)
	}
	check("--media-file URL")
	if err := os.Rename(filepath.Join(served, "elsewhere.media"), trace.MediaPath(tr)); err != nil {
		t.Fatal(err)
	}
	if stderr, code := replay(); code != ExitOK {
		t.Fatalf("media file beside the trace URL: exit %d\n%s", code, stderr)
	}
	check("beside the trace URL")

	_, stderr, code = runCLI(t, "replay", tr, "--target", srv.URL(), "-o", filepath.Join(dir, "r.parquet"), "--media-file", files.URL+"/x.media")
	if code != ExitUsage || !strings.Contains(stderr, "--media-file") {
		t.Errorf("--media-file URL with a local trace: exit %d, want %d naming the flag\n%s", code, ExitUsage, stderr)
	}
}
