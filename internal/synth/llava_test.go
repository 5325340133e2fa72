package synth

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// writeImage writes a real image made by internal/media at dir/name and
// returns its bytes.
func writeImage(t *testing.T, dir, name, format string, w, h int32, seed int64) []byte {
	t.Helper()
	b, err := media.Make(nil, &trace.Media{Kind: trace.MediaImage, Format: format, Width: w, Height: h, Seed: seed})
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
	return b
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const llavaJSON = `[
 {"id": "one", "image": "imgs/a.png", "conversations": [
   {"from": "human", "value": "<image>\nWhat is in this picture?"},
   {"from": "gpt", "value": "Noise, mostly."}]},
 {"id": "two", "image": ["imgs/b.jpg", "imgs/copy-of-a.png"], "conversations": [
   {"from": "human", "value": "Compare <image> with the next one."},
   {"from": "gpt", "value": "The first is a JPEG."},
   {"from": "human", "value": "And this? <image>"},
   {"from": "gpt", "value": "The same noise as the first record."}]},
 {"id": "text", "conversations": [
   {"from": "human", "value": "No image here."},
   {"from": "gpt", "value": "Right."}]}
]`

// generateLLaVA imports the dataset at path into dir/trace.parquet.
func generateLLaVA(t *testing.T, path, imageDir, out string) (Result, error) {
	t.Helper()
	src, err := NewLLaVA(LLaVAOptions{ShareGPTOptions: ShareGPTOptions{Path: path, Tokenizer: tokenizer.Default()}, ImageDir: imageDir})
	if err != nil {
		t.Fatal(err)
	}
	return Generate(context.Background(), Job{Source: src, Output: out})
}

// A LLaVA dataset's images are read from the files beside it, placed on
// the user messages of their placeholders (which leave the text), and
// stored once per distinct content: a copy under another name is the
// same item.
func TestLLaVAImport(t *testing.T) {
	dir := t.TempDir()
	a := writeImage(t, dir, "imgs/a.png", "png", 64, 48, 1)
	b := writeImage(t, dir, "imgs/b.jpg", "jpeg", 40, 30, 2)
	writeImage(t, dir, "imgs/copy-of-a.png", "png", 64, 48, 1)
	in := filepath.Join(dir, "llava.json")
	writeText(t, in, llavaJSON)
	out := filepath.Join(dir, "trace.parquet")
	res, err := generateLLaVA(t, in, "", out)
	if err != nil {
		t.Fatal(err)
	}
	if res.MediaItems != 2 || res.MediaBytes != int64(len(a)+len(b)) {
		t.Errorf("stored %d items of %d bytes, want 2 of %d", res.MediaItems, res.MediaBytes, len(a)+len(b))
	}
	if res.Report["images"] != "3" || res.Report["image_files"] != "3" {
		t.Errorf("report %v: want 3 images from 3 files", res.Report)
	}
	turns, meta, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Source != "llava" {
		t.Errorf("source %q", meta.Source)
	}
	got := map[string][]trace.Media{} // conversation/turn: its items
	for _, tu := range turns {
		for _, m := range tu.Messages {
			if strings.Contains(m.Content, "<image>") {
				t.Errorf("%s/%d: placeholder left in %q", tu.ConversationID, tu.Turn, m.Content)
			}
			if len(m.Media) > 0 {
				if m.Role != "user" {
					t.Errorf("%s/%d: media on a %s message", tu.ConversationID, tu.Turn, m.Role)
				}
				got[tu.ConversationID+"/"+string(rune('0'+tu.Turn))] = m.Media
			}
		}
	}
	want := map[string]trace.Media{
		"one/0": {Kind: trace.MediaImage, Format: "png", Width: 64, Height: 48, Hash: trace.MediaHash(a), Bytes: int64(len(a))},
		"two/0": {Kind: trace.MediaImage, Format: "jpeg", Width: 40, Height: 30, Hash: trace.MediaHash(b), Bytes: int64(len(b))},
		"two/1": {Kind: trace.MediaImage, Format: "png", Width: 64, Height: 48, Hash: trace.MediaHash(a), Bytes: int64(len(a))},
	}
	if len(got) != len(want) {
		t.Errorf("media on %v, want on %d user messages", got, len(want))
	}
	for k, w := range want {
		if len(got[k]) != 1 || got[k][0] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	s, err := trace.OpenMediaFile(trace.MediaPath(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 2 {
		t.Errorf("the media file holds %d items, want 2", s.Len())
	}
	for name, img := range map[string][]byte{"a.png": a, "b.jpg": b} {
		if data, err := s.Load(trace.MediaHash(img)); err != nil || string(data) != string(img) {
			t.Errorf("%s read back: %v", name, err)
		}
	}

	// Without --force neither the trace nor its media file is replaced.
	if _, err := generateLLaVA(t, in, "", out); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second import over the first: %v", err)
	}
	os.Remove(out)
	if _, err := generateLLaVA(t, in, "", out); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), trace.MediaPath(out)) {
		t.Errorf("an import over a media file left alone: %v", err)
	}
}

// --image-dir is where relative paths are read from.
func TestLLaVAImageDir(t *testing.T) {
	dir, imgs := t.TempDir(), t.TempDir()
	writeImage(t, imgs, "imgs/a.png", "png", 8, 8, 1)
	writeImage(t, imgs, "imgs/b.jpg", "jpeg", 8, 8, 2)
	writeImage(t, imgs, "imgs/copy-of-a.png", "png", 8, 8, 1)
	in := filepath.Join(dir, "llava.json")
	writeText(t, in, llavaJSON)
	if _, err := generateLLaVA(t, in, "", filepath.Join(dir, "t1.parquet")); err == nil || !strings.Contains(err.Error(), "imgs/a.png") {
		t.Fatalf("images looked for beside the dataset: %v", err)
	}
	if _, err := generateLLaVA(t, in, imgs, filepath.Join(dir, "t2.parquet")); err != nil {
		t.Fatal(err)
	}
}

// A missing image, a file that is no image, a URL and a bad image field
// fail the import naming the dataset, the record and the path; nothing
// is written.
func TestLLaVABadImages(t *testing.T) {
	dir := t.TempDir()
	writeImage(t, dir, "ok.png", "png", 8, 8, 1)
	writeText(t, filepath.Join(dir, "notes.png"), "this is text, not a PNG")
	conv := `"conversations": [{"from": "human", "value": "<image> what?"}, {"from": "gpt", "value": "that."}]`
	for _, c := range []struct {
		name, image string
		want        []string
	}{
		{"missing", `"gone.png"`, []string{`record 1 (id "bad")`, "gone.png", "no such file"}},
		{"not an image", `"notes.png"`, []string{`record 1 (id "bad")`, "notes.png", "does not decode as an image"}},
		{"url", `"https://example.com/x.png"`, []string{`record 1 (id "bad")`, "downloads nothing"}},
		{"directory", `"."`, []string{`record 1 (id "bad")`, "not a regular file"}},
		{"field", `{"path": "ok.png"}`, []string{`record 1 (id "bad")`, `"image"`, "a path or a list of paths"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, c.name+".json")
			writeText(t, in, `[{"id": "ok", "image": "ok.png", `+conv+`}, {"id": "bad", "image": `+c.image+`, `+conv+`}]`)
			out := filepath.Join(dir, c.name+".parquet")
			_, err := generateLLaVA(t, in, "", out)
			if err == nil {
				t.Fatal("imported")
			}
			for _, w := range append(c.want, in) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: want it to name %q", err, w)
				}
			}
			for _, p := range []string{out, trace.MediaPath(out)} {
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s written: %v", p, err)
				}
			}
		})
	}
}

// vLLM's custom_mm JSONL: one request per record, its first image only,
// every request of --custom-output-len tokens.
func TestVLLMCustomMM(t *testing.T) {
	dir := t.TempDir()
	a := writeImage(t, dir, "a.png", "png", 30, 20, 1)
	b := writeImage(t, dir, "sub/b.jpg", "jpeg", 20, 30, 2)
	in := filepath.Join(dir, "mm.jsonl")
	writeText(t, in, `{"prompt": "How many red blocks?", "image_files": ["a.png", "sub/b.jpg"]}
{"prompt": "Which country?", "image_files": ["file://`+filepath.Join(dir, "sub/b.jpg")+`"]}
{"prompt": "Again the first.", "image_files": ["a.png"]}
`)
	src, err := NewVLLMCustomMM(VLLMCustomMMOptions{Path: in, Tokenizer: tokenizer.Default(), Count: 5, NoShuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "trace.parquet")
	res, err := Generate(context.Background(), Job{Source: src, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conversations != 5 || res.MediaItems != 2 || res.MediaBytes != int64(len(a)+len(b)) {
		t.Errorf("%d requests, %d items of %d bytes; want 5 (oversampled), 2 items", res.Conversations, res.MediaItems, res.MediaBytes)
	}
	if res.Report["extra_images_ignored"] != "1" || res.Report["oversampled"] != "2" {
		t.Errorf("report %v", res.Report)
	}
	turns, _, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	byPrompt := map[string]string{"How many red blocks?": trace.MediaHash(a), "Which country?": trace.MediaHash(b), "Again the first.": trace.MediaHash(a)}
	for _, tu := range turns {
		m := tu.Messages[0]
		if len(tu.Messages) != 1 || len(m.Media) != 1 || m.Media[0].Hash != byPrompt[m.Content] || tu.OutputTokens != VLLMDefaultCustomOutputLen {
			t.Errorf("%s: %+v, %d output tokens", tu.ConversationID, tu.Messages, tu.OutputTokens)
		}
	}

	for _, c := range []struct{ text, want string }{
		{`{"prompt": "x", "image_files": ["http://example.com/a.png"]}`, "downloads nothing"},
		{`{"prompt": "x", "image_files": []}`, `record 0: "image_files"`},
		{`{"image_files": ["a.png"]}`, `record 0 has no "prompt"`},
		{`{"prompt": "x", "image_files": ["a.png"]}` + "\n{oops", "record 1"},
	} {
		writeText(t, in, c.text)
		src, _ := NewVLLMCustomMM(VLLMCustomMMOptions{Path: in, Tokenizer: tokenizer.Default()})
		os.Remove(out)
		os.Remove(trace.MediaPath(out))
		_, err := Generate(context.Background(), Job{Source: src, Output: out})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), in) {
			t.Errorf("%s: %v, want it to name %s and %q", c.text, err, in, c.want)
		}
	}
}

// --images on a dataset of real images adds virtual ones after them.
func TestLLaVAWithVirtualImages(t *testing.T) {
	dir := t.TempDir()
	a := writeImage(t, dir, "a.png", "png", 8, 8, 1)
	in := filepath.Join(dir, "llava.json")
	writeText(t, in, `[{"id": "one", "image": "a.png", "conversations": [{"from": "human", "value": "<image> what?"}, {"from": "gpt", "value": "noise"}]}]`)
	src, err := NewLLaVA(LLaVAOptions{ShareGPTOptions: ShareGPTOptions{Path: in, Tokenizer: tokenizer.Default()}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := ParseDist("1", Count)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t.parquet")
	mo := &MediaOptions{Images: one, ImageSizes: []Size{{16, 16}}, ImageFormat: "png"}
	if _, err := Generate(context.Background(), Job{Source: src, Output: out, Media: mo}); err != nil {
		t.Fatal(err)
	}
	turns, _, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	items := turns[0].Messages[len(turns[0].Messages)-1].Media
	if len(items) != 2 || items[0].Hash != trace.MediaHash(a) || items[1].Hash != "" || items[1].Width != 16 {
		t.Errorf("items %+v: want the real image, then a virtual 16x16 one", items)
	}
}
