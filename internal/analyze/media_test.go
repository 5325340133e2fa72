package analyze

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// keyPaths lists every key of a decoded JSON value as a dotted path.
func keyPaths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			out[prefix+k] = true
			keyPaths(prefix+k+".", c, out)
		}
	case []any:
		for _, c := range x {
			keyPaths(prefix+"[].", c, out)
		}
	}
}

// A run without media has no media figures: no key of its JSON (vLLM's
// and tracekit's) names media, and its text has no media section.
func TestTextRunHasNoMediaKeys(t *testing.T) {
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, handRecords())
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Media != nil {
		t.Fatalf("a text run has media figures: %+v", s.Media)
	}
	keys := map[string]bool{}
	keyPaths("", jsonOf(t, s, true), keys)
	for k := range keys {
		for _, seg := range strings.Split(k, ".") {
			if seg == "media" || strings.HasPrefix(seg, "media_") || strings.HasPrefix(seg, "image") || strings.HasPrefix(seg, "video") || strings.HasPrefix(seg, "ttft_by_") {
				t.Errorf("a text run's JSON has the key %s", k)
			}
		}
	}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "-Media-") {
		t.Errorf("a text run's report has a media section:\n%s", b.String())
	}
}

// The media section, hand-computed: counts and bytes by kind, the send
// time where a write start was recorded, media tokens only where the
// usage reported them (audio here never: unknown, not 0), and TTFT by
// media items and bytes with the text request in the 0 buckets.
func TestMediaSection(t *testing.T) {
	img := rec("i1", 0, 0, 0, 100, 400, 200, "", 900, 10, 2, -1, [2]int64{300, 1}, [2]int64{350, 1})
	img.WriteStartNs, img.RequestBytes = 60*ms, 3<<20
	img.MediaItems, img.MediaBytes, img.ImageItems, img.ImageBytes, img.ImageTokens = 2, 2<<20, 2, 2<<20, 2450
	both := rec("i2", 0, 0, 0, 100, 600, 200, "", 1000, 10, 2, -1, [2]int64{500, 1}, [2]int64{550, 1})
	both.WriteStartNs, both.RequestBytes = 80*ms, 5<<20
	both.MediaItems, both.MediaBytes = 3, 3<<20
	both.ImageItems, both.ImageBytes, both.ImageTokens = 2, 2<<20, 2450
	both.AudioItems, both.AudioBytes = 1, 1<<20 // audio tokens not reported
	text := rec("t1", 0, 0, 0, 100, 200, 200, "", 10, 10, 2, -1, [2]int64{150, 1}, [2]int64{160, 1})
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, []trace.Record{img, both, text})
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Media
	if m == nil {
		t.Fatal("no media figures")
	}
	if m.Requests != 2 || m.Items != 5 || m.Bytes != 5<<20 || !m.KindsKnown || m.RequestBytes.Mean != 4<<20 {
		t.Errorf("media: %d requests %d items %d bytes, kinds known %v, body mean %v", m.Requests, m.Items, m.Bytes, m.KindsKnown, m.RequestBytes.Mean)
	}
	if m.Send.Count != 2 || m.Send.Min != 20 || m.Send.Max != 40 {
		t.Errorf("send time %+v, want 20 and 40 ms", m.Send)
	}
	if len(m.Kinds) != 2 || m.Kinds[0].Kind != trace.MediaImage || m.Kinds[1].Kind != trace.MediaAudio {
		t.Fatalf("kinds %+v, want image and audio", m.Kinds)
	}
	if k := m.Kinds[0]; k.Requests != 2 || k.Items != 4 || k.TokensReported != 2 || k.Tokens != 4900 || k.TokensPer.Mean != 2450 {
		t.Errorf("image: %+v", k)
	}
	if k := m.Kinds[1]; k.Requests != 1 || k.Items != 1 || k.Bytes != 1<<20 || k.TokensReported != 0 || k.Tokens != 0 {
		t.Errorf("audio: %+v", k)
	}
	wantItems := []MediaBucket{{Label: "0", Requests: 1, MeanTTFT: 50}, {Label: "2", Lo: 2, Hi: 2, Requests: 1, MeanTTFT: 200}, {Label: "3-4", Lo: 3, Hi: 4, Requests: 1, MeanTTFT: 400}}
	wantBytes := []MediaBucket{{Label: "0", Requests: 1, MeanTTFT: 50}, {Label: "1 MiB - 4 MiB", Lo: 1<<20 + 1, Hi: 4 << 20, Requests: 2, MeanTTFT: 300}}
	for name, c := range map[string][2][]MediaBucket{"items": {m.ByItems, wantItems}, "bytes": {m.ByBytes, wantBytes}} {
		got, want := c[0], c[1]
		if len(got) != len(want) {
			t.Fatalf("TTFT by %s: %+v, want %+v", name, got, want)
		}
		for i := range want {
			g := got[i]
			if g.Label != want[i].Label || g.Lo != want[i].Lo || g.Hi != want[i].Hi || g.Requests != want[i].Requests || g.MeanTTFT != want[i].MeanTTFT {
				t.Errorf("TTFT by %s, bucket %d: %+v, want %+v", name, i, g, want[i])
			}
		}
	}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Requests with media:", "2 of 3", "body send time (ms)", "unknown: not reported by the server", "1 MiB - 4 MiB"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the report lacks %q:\n%s", w, b.String())
		}
	}
	b.Reset()
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{`id="ttft-media-items"`, `id="ttft-media-bytes"`} {
		if !strings.Contains(b.String(), id) {
			t.Errorf("the HTML report has no %s chart", id)
		}
	}
}

// A recording from before the columns by kind (media_items only, as
// replay wrote them first) shows its totals and says the kinds and the
// send time are not recorded, rather than showing zeros.
func TestMediaWithoutKinds(t *testing.T) {
	r := rec("i1", 0, 0, 0, 100, 400, 200, "", 900, 10, 2, -1, [2]int64{300, 1}, [2]int64{350, 1})
	r.MediaItems, r.MediaBytes = 2, 1000
	p := writeRecording(t, t.TempDir(), "run.parquet", trace.RunMeta{}, []trace.Record{r})
	s, err := Files([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Media; m == nil || m.KindsKnown || len(m.Kinds) != 0 || m.Items != 2 || m.Send.Count != 0 {
		t.Fatalf("media %+v, want 2 items of unknown kinds and no send time", m)
	}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"media by kind: not recorded", "body send time: not recorded"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the report lacks %q:\n%s", w, b.String())
		}
	}
}
