package transcription_test

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

var head = api.Head{ID: "r1", Model: `whisper "v3"`, Created: 1700000000, Prompt: 150, Completion: 4, Finish: api.FinishStop}

var pieces = []apitest.Piece{
	{Kind: apitest.Text, Text: " Hello", Tokens: 1},
	{Kind: apitest.Text, Text: " \"wide\"\n", Tokens: 2},
	{Kind: apitest.Text, Text: " world", Tokens: 1},
}

const text = " Hello \"wide\"\n world"

// What the encoder writes in either shape, the decoder reads back: the
// transcript, one output event per delta, the usage and the end.
func TestEncoderRoundTrip(t *testing.T) {
	u := api.Usage{Prompt: 150, Completion: 4, Cached: -1, Reasoning: -1}
	tokens := api.Usage{Prompt: 150, Completion: 4, Cached: -1, Reasoning: -1}
	for _, c := range []struct {
		shape              transcription.Shape
		include, continue_ bool
		usage              api.Usage
		has                string
	}{
		{transcription.ShapeVLLM, false, false, api.NoUsage, `"object":"transcription.chunk"`},
		{transcription.ShapeVLLM, true, false, tokens, `"choices":[],"usage":{"prompt_tokens":150`},
		{transcription.ShapeVLLM, false, true, tokens, `"usage":{"prompt_tokens":150,"completion_tokens":3,`},
		{transcription.ShapeOpenAI, false, false, tokens, `"type":"transcript.text.done","text":" Hello \"wide\"\n world","usage":{"type":"tokens","input_tokens":150,"output_tokens":4,"total_tokens":154}`},
	} {
		h := head
		h.IncludeUsage, h.ContinuousUsage = c.include, c.continue_
		body := apitest.Encode(transcription.NewEncoder(c.shape, false), &h, pieces, u, false)
		if !strings.Contains(string(body), c.has) {
			t.Errorf("%s: want %s in\n%s", c.shape, c.has, body)
		}
		apitest.Check(t, api.Transcriptions, body, false, apitest.Want{Text: text, Events: 3, Done: true, Usage: c.usage})
		if c.shape == transcription.ShapeVLLM && strings.Count(string(body), `"finish_reason":"stop"`) != 1 {
			t.Errorf("the finish_reason rides on one chunk, the one that reaches the plan:\n%s", body)
		}
		// Without its terminal event the stream is truncated.
		body = apitest.Encode(transcription.NewEncoder(c.shape, false), &h, pieces, u, true)
		_, r := apitest.Parse(t, api.Transcriptions, body, len(body), false)
		if r.ErrorKind != trace.ErrStreamTruncated || !strings.Contains(r.ErrorMessage, "transcript.text.done or data: [DONE]") {
			t.Errorf("%s without its end: %s %q", c.shape, r.ErrorKind, r.ErrorMessage)
		}
	}
	body := apitest.Encode(transcription.NewEncoder(transcription.ShapeVLLM, true), &head, pieces, u, false)
	if !strings.Contains(string(body), `"object":"translation.chunk"`) {
		t.Errorf("a translation's chunks:\n%s", body)
	}
}

// The servers' own wire shapes (the reference's section on speech to
// text): OpenAI's delta and done events, vLLM's chunks with a usage chunk.
func TestWireShapes(t *testing.T) {
	openai := "data: {\"type\":\"transcript.text.delta\",\"delta\":\"The\",\"logprobs\":[]}\n\n" +
		"data: {\"type\":\"transcript.text.delta\",\"delta\":\" quick fox\"}\n\n" +
		"data: {\"type\":\"transcript.text.done\",\"text\":\"The quick fox\",\"usage\":{\"type\":\"tokens\",\"input_tokens\":14,\"input_token_details\":{\"text_tokens\":0,\"audio_tokens\":14},\"output_tokens\":4,\"total_tokens\":18}}\n\n"
	apitest.Check(t, api.Transcriptions, []byte(openai), false, apitest.Want{Text: "The quick fox", Events: 2, Done: true,
		Usage: api.Usage{Prompt: 14, Completion: 4, Cached: -1, Reasoning: -1}})
	vllm := "data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1,\"model\":\"openai/whisper-large-v3\",\"choices\":[{\"delta\":{\"content\":\" The\"},\"finish_reason\":null,\"stop_reason\":null}]}\n\n" +
		"data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1,\"model\":\"openai/whisper-large-v3\",\"choices\":[{\"delta\":{\"content\":\" fox\"},\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n" +
		"data: {\"id\":\"trsc-1\",\"object\":\"transcription.chunk\",\"created\":1,\"model\":\"openai/whisper-large-v3\",\"choices\":[],\"usage\":{\"prompt_tokens\":1500,\"completion_tokens\":2,\"total_tokens\":1502}}\n\n" +
		"data: [DONE]\n\n"
	apitest.Check(t, api.Transcriptions, []byte(vllm), false, apitest.Want{Text: " The fox", Events: 2, Done: true,
		Usage: api.Usage{Prompt: 1500, Completion: 2, Cached: -1, Reasoning: -1}})
	// errors, and answers of other APIs
	apitest.Check(t, api.Transcriptions, []byte("data: {\"type\":\"error\",\"error\":{\"type\":\"server_error\",\"message\":\"boom\"}}\n\n"), false,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "boom", Usage: api.NoUsage})
	apitest.Check(t, api.Transcriptions, []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"), false,
		apitest.Want{Text: "x", Kind: api.ErrWrongAPI, MsgHas: "a chat answer", Usage: api.NoUsage})
	apitest.Check(t, api.Transcriptions, []byte("event: response.created\ndata: {\"type\":\"response.created\"}\n\n"), false,
		apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "responses", Usage: api.NoUsage})
}

// Non-streaming bodies: vLLM's reports seconds (no tokens), OpenAI's tokens.
func TestBodies(t *testing.T) {
	a := api.Answer{Text: "all \"at\" once", Usage: api.Usage{Prompt: 150, Completion: 4, Cached: -1, Reasoning: -1}}
	enc := transcription.NewEncoder(transcription.ShapeVLLM, false)
	enc.SetSeconds(3)
	body := enc.Body(nil, &head, &a)
	if want := `{"text":"all \"at\" once","usage":{"type":"duration","seconds":3}}`; string(body) != want {
		t.Errorf("vLLM body %s, want %s", body, want)
	}
	apitest.Check(t, api.Transcriptions, body, true, apitest.Want{Text: a.Text, Events: 1, Done: true, Usage: api.NoUsage})
	body = transcription.NewEncoder(transcription.ShapeOpenAI, false).Body(nil, &head, &a)
	apitest.Check(t, api.Transcriptions, body, true, apitest.Want{Text: a.Text, Events: 1, Done: true, Usage: a.Usage})
	apitest.Check(t, api.Transcriptions, []byte(`{"error":{"message":"Maximum clip duration (30s) exceeded","type":"BadRequestError","code":400}}`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "Maximum clip duration (30s) exceeded", Usage: api.NoUsage})
}

// The request is a multipart form a standard reader takes apart: the
// clip's bytes under file (audio.wav, audio/wav) and the fields.
func TestAppendRequest(t *testing.T) {
	m := trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 1200, Seed: 5}
	wav, err := media.Make(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	m.Data = string(wav)
	temp := 0.5
	msgs := []trace.Message{{Role: "system", Content: "names: Ada"}, {Role: "user", Content: "a meeting", Media: []trace.Media{m}}}
	for _, nonStreaming := range []bool{false, true} {
		r := api.Request{Model: "whisper", MaxTokens: 64, NonStreaming: nonStreaming, Temperature: &temp}
		body := transcription.AppendRequest(nil, &r, msgs)
		_, params, err := mime.ParseMediaType(transcription.ContentType)
		if err != nil {
			t.Fatal(err)
		}
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		got := map[string]string{}
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(p)
			if p.FormName() == "file" {
				if p.FileName() != "audio.wav" || p.Header.Get("Content-Type") != "audio/wav" || !bytes.Equal(b, wav) {
					t.Errorf("file part %q %q, %d bytes (want the clip's %d)", p.FileName(), p.Header.Get("Content-Type"), len(b), len(wav))
				}
				continue
			}
			got[p.FormName()] = string(b)
		}
		want := map[string]string{"model": "whisper", "language": "en", "prompt": "names: Ada\na meeting", "response_format": "json",
			"max_completion_tokens": "64", "temperature": "0.5", "stream": "true", "stream_include_usage": "true"}
		if nonStreaming {
			delete(want, "stream")
			delete(want, "stream_include_usage")
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("non-streaming %v: fields %v, want %v", nonStreaming, got, want)
		}
	}
	// No text: no prompt field.
	body := transcription.AppendRequest(nil, &api.Request{Model: "w"}, []trace.Message{{Role: "user", Media: []trace.Media{m}}})
	if bytes.Contains(body, []byte(`name="prompt"`)) {
		t.Error("a turn without text sent a prompt field")
	}
}

func openaiStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"type\":\"transcript.text.delta\",\"delta\":\" word%d\"}\n\n", i)
	}
	fmt.Fprintf(&b, "data: {\"type\":\"transcript.text.done\",\"text\":\"%s\",\"usage\":{\"type\":\"tokens\",\"input_tokens\":150,\"output_tokens\":%d,\"total_tokens\":%d}}\n\n",
		strings.Repeat(" word", n), n, 150+n)
	return b.Bytes()
}

func vllmStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"id\":\"trsc-b\",\"object\":\"transcription.chunk\",\"created\":1,\"model\":\"openai/whisper-large-v3\",\"choices\":[{\"delta\":{\"content\":\" word%d\"},\"finish_reason\":null,\"stop_reason\":null}]}\n\n", i)
	}
	fmt.Fprintf(&b, "data: {\"id\":\"trsc-b\",\"object\":\"transcription.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":1500,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, 1500+n)
	return b.Bytes()
}

// Decoding allocates nothing per event once the buffers have grown.
func TestNoAlloc(t *testing.T) {
	apitest.NoAlloc(t, api.Transcriptions, openaiStream(64), 1500)
	apitest.NoAlloc(t, api.Transcriptions, vllmStream(64), 1500)
}

type oneCounter struct{}

func (oneCounter) Count(string) int { return 1 }

// BenchmarkFeed measures record.Stream with this decoder, fed in 1.5 KB
// reads, as record's BenchmarkFeed does chat's. allocs/op must be 0.
func BenchmarkFeed(b *testing.B) {
	const events = 256
	for _, c := range []struct {
		shape string
		data  []byte
	}{{"openai", openaiStream(events)}, {"vllm", vllmStream(events)}} {
		b.Run(c.shape, func(b *testing.B) {
			s := record.NewStream(oneCounter{})
			if err := s.SetAPI(api.Transcriptions); err != nil {
				b.Fatal(err)
			}
			var rec trace.Record
			run := func() {
				s.Reset()
				for p := c.data; len(p) > 0; {
					n := min(1500, len(p))
					s.Feed(p[:n], 1)
					p = p[n:]
				}
				s.Fill(&rec)
			}
			run()
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
