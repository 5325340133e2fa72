package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// Speech-to-text end to end from the command line, in both stream shapes
// the mock serves: synth puts a 2-5 s clip on every request, replay
// uploads it to the mock, and every event of every recording matches the
// mock's log (count, tokens, received after it was sent); analyze reports
// the endpoint with no error and the audio the trace holds.
func TestSpeechEndToEnd(t *testing.T) {
	for _, shape := range []string{"vllm", "openai"} {
		for _, ep := range []string{trace.EndpointTranscriptions, trace.EndpointTranslations} {
			t.Run(shape+"/"+ep, func(t *testing.T) {
				srv := mocktest.Start(t, func(c *mock.Config) { c.TranscriptionStream = shape })
				dir := t.TempDir()
				tr, rec := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet")
				if _, stderr, code := runCLI(t, "synth", "--endpoint", ep, "--audio-seconds", "2-5", "--conversations", "4",
					"--turns", "1", "--input-tokens", "8", "--output-tokens", "12", "--rate", "0", "--seed", "3", "-o", tr); code != ExitOK {
					t.Fatalf("synth: exit %d: %s", code, stderr)
				}
				turns, _, err := trace.ReadTurns(tr)
				if err != nil {
					t.Fatal(err)
				}
				var audioMs int64
				for _, tu := range turns {
					for _, m := range tu.Messages {
						for _, it := range m.Media {
							audioMs += int64(it.DurationMs)
						}
					}
				}
				if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none"); code != ExitOK {
					t.Fatalf("replay: exit %d: %s", code, stderr)
				}
				recs, meta, err := trace.ReadRecords(rec)
				if err != nil || len(recs) != len(turns) {
					t.Fatalf("%d records of %d turns, %v", len(recs), len(turns), err)
				}
				logs := map[string]mock.LogEntry{}
				for _, e := range srv.Log() {
					logs[e.RequestID] = e
				}
				for _, r := range recs {
					e, ok := logs[r.RequestID]
					switch {
					case r.ErrorKind != "" || r.Endpoint != ep:
						t.Fatalf("%s: endpoint %q, error %s %q", r.RequestID, r.Endpoint, r.ErrorKind, r.ErrorMessage)
					case !ok || e.Endpoint != ep || e.MediaItems != 1 || e.MediaBytes != r.MediaBytes:
						t.Fatalf("%s: log entry %v: endpoint %q, media %d items %d bytes (recording %d bytes)", r.RequestID, ok, e.Endpoint, e.MediaItems, e.MediaBytes, r.MediaBytes)
					case len(r.EventNs) == 0 || len(r.EventNs) != len(e.EventMonoNs) || !slices.Equal(r.EventTokens, e.EventTokens):
						t.Fatalf("%s: recorded %d events %v, the mock sent %d %v", r.RequestID, len(r.EventNs), r.EventTokens, len(e.EventMonoNs), e.EventTokens)
					case r.CompletionTokens != e.CompletionTokens || r.PromptTokens != e.PromptTokens || r.FirstAnswerEvent != 0:
						t.Errorf("%s: tokens %d/%d, the mock's %d/%d; first answer event %d", r.RequestID, r.PromptTokens, r.CompletionTokens, e.PromptTokens, e.CompletionTokens, r.FirstAnswerEvent)
					}
					for i, ns := range r.EventNs {
						if got := meta.StartMonoNs + ns; got < e.ArrivalMonoNs || i > 0 && ns < r.EventNs[i-1] {
							t.Errorf("%s event %d: received at %d, before the mock had the request (%d) or before event %d", r.RequestID, i, got, e.ArrivalMonoNs, i-1)
						}
					}
				}
				var out struct {
					Tracekit struct {
						Endpoints map[string]struct {
							Completed, Failed int
							Generation        struct {
								TTFT  struct{ Count int }
								ITL   struct{ Count int }
								Audio struct {
									Seconds float64
									PerS    float64 `json:"per_s"`
								}
							}
						} `json:"endpoints"`
					} `json:"tracekit"`
				}
				analyzeJSON(t, rec, &out)
				e := out.Tracekit.Endpoints[ep]
				if e.Completed != len(recs) || e.Failed != 0 || e.Generation.TTFT.Count != len(recs) || e.Generation.ITL.Count == 0 {
					t.Errorf("analyze's %s section: %+v, want %d completed streams, none failed, ITL gaps", ep, e, len(recs))
				}
				if a := e.Generation.Audio; math.Abs(a.Seconds-float64(audioMs)/1000) > 1e-3 || a.PerS <= 0 {
					t.Errorf("analyze's audio: %+v, want %.3f s transcribed at a positive rate", a, float64(audioMs)/1000)
				}
			})
		}
	}
}

// A turn without its clip is refused before anything is sent, naming the
// turn; synth refuses a speech endpoint without --audio-seconds.
func TestSpeechRefusals(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--endpoint", "transcriptions", "--conversations", "1", "-o", tr); code != ExitUsage || !strings.Contains(stderr, "--audio-seconds") {
		t.Errorf("synth without --audio-seconds: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "synth", "--conversations", "1", "--turns", "1", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	srv := mocktest.Start(t, nil)
	_, stderr, code := runCLI(t, "replay", tr, "--endpoint", "translations", "--target", srv.URL(), "-o", filepath.Join(dir, "r.parquet"), "--no-analyze", "--progress", "none")
	if code != ExitUsage || !strings.Contains(stderr, "0 audio clips") || !strings.Contains(stderr, "/v1/audio/translations") {
		t.Errorf("replay of a turn without audio: exit %d: %s", code, stderr)
	}
	if n := len(srv.Log()); n != 0 {
		t.Errorf("the mock got %d requests", n)
	}
}

// A real clip of another shape than the 16 kHz mono WAV synth makes
// (44.1 kHz stereo, as a captured upload may be): the recording keeps its
// length from the trace, and analyze reports that, not a length guessed
// from its bytes.
func TestSpeechRealClipLength(t *testing.T) {
	const rate, channels, ms = 44100, 2, 1500
	data := make([]byte, rate*channels*2*ms/1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	wav := binary.LittleEndian.AppendUint32([]byte("RIFF"), uint32(36+len(data)))
	wav = append(wav, "WAVEfmt "...)
	wav = binary.LittleEndian.AppendUint32(wav, 16)
	for _, v := range []uint16{1, channels} {
		wav = binary.LittleEndian.AppendUint16(wav, v)
	}
	wav = binary.LittleEndian.AppendUint32(wav, rate)
	wav = binary.LittleEndian.AppendUint32(wav, rate*channels*2)
	wav = binary.LittleEndian.AppendUint16(wav, channels*2)
	wav = binary.LittleEndian.AppendUint16(wav, 16)
	wav = binary.LittleEndian.AppendUint32(append(wav, "data"...), uint32(len(data)))
	wav = append(wav, data...)

	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	mw, err := trace.NewMediaWriter(trace.MediaPath(tr), false)
	if err != nil {
		t.Fatal(err)
	}
	item, err := mw.Put(trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: ms}, wav)
	if err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	var turns []trace.Turn
	for i := range 3 {
		turns = append(turns, trace.Turn{ConversationID: fmt.Sprintf("c%d", i), Endpoint: trace.EndpointTranscriptions, OutputTokens: 8,
			Messages: []trace.Message{{Role: "user", Media: []trace.Media{item}}}})
	}
	if err := trace.WriteTrace(tr, trace.TraceMeta{Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	srv := mocktest.Start(t, nil)
	rec := filepath.Join(dir, "r.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none", "--no-probe"); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	recs, _, err := trace.ReadRecords(rec)
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.ErrorKind != "" || r.AudioMs != ms || r.AudioBytes != int64(len(wav)) {
			t.Fatalf("%s: error %s %q, audio %d ms of %d bytes; want %d ms of %d", r.RequestID, r.ErrorKind, r.ErrorMessage, r.AudioMs, r.AudioBytes, ms, len(wav))
		}
	}
	var out struct {
		Tracekit struct {
			Endpoints map[string]struct {
				Generation struct {
					Audio struct {
						Seconds  float64
						MeanClip float64 `json:"mean_clip_seconds"`
					}
				}
			} `json:"endpoints"`
		} `json:"tracekit"`
	}
	analyzeJSON(t, rec, &out)
	if a := out.Tracekit.Endpoints[trace.EndpointTranscriptions].Generation.Audio; math.Abs(a.Seconds-4.5) > 1e-9 || math.Abs(a.MeanClip-1.5) > 1e-9 {
		t.Errorf("analyze's audio: %+v, want 4.5 s in clips of 1.5 s", a)
	}
}
