package transcription

import (
	"strconv"
	"unsafe"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// Boundary separates the parts of a request body. It is fixed, so bodies
// are the same bytes on every run; 40 bytes of it in uniformly random
// audio samples is beyond any chance that matters.
const Boundary = "tracekit-7b3e1f9c2a6d48e0b5c1d7a3f9e2b6c4"

// ContentType is the Content-Type of a request body AppendRequest makes.
const ContentType = "multipart/form-data; boundary=" + Boundary

// Language is the language field a request carries, as vLLM's benchmark
// (openai-audio) sends it.
const Language = "en"

// Audio returns the audio item a request uploads: the first audio item of
// msgs, nil when none.
func Audio(msgs []trace.Message) *trace.Media {
	for i := range msgs {
		for j := range msgs[i].Media {
			if msgs[i].Media[j].Kind == trace.MediaAudio {
				return &msgs[i].Media[j]
			}
		}
	}
	return nil
}

// Prompt returns the text a request carries as its prompt field: the
// messages' text joined by newlines, "" when they have none.
func Prompt(msgs []trace.Message) string {
	p := ""
	for i := range msgs {
		if msgs[i].Content == "" {
			continue
		}
		if p != "" {
			p += "\n"
		}
		p += msgs[i].Content
	}
	return p
}

// AppendRequest appends a multipart/form-data body (ContentType) of the
// turn's messages msgs: the file part (audio.wav, with its MIME type) of
// their audio item, whose bytes the caller made before the request was
// due (m.Data), then model, language, the prompt when msgs have text,
// response_format json, and, when streaming, stream=true with
// stream_include_usage=true (vLLM's usage flag; OpenAI ignores it);
// max_completion_tokens when r.MaxTokens is set, and temperature. The
// form's values are strings, so --extra-body has no place in it.
func AppendRequest(dst []byte, r *api.Request, msgs []trace.Message) []byte {
	if m := Audio(msgs); m != nil {
		dst = append(dst, "--"+Boundary+"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio."...)
		dst = append(dst, m.Format...)
		dst = append(dst, "\"\r\nContent-Type: "...)
		dst = append(dst, api.MIME(m)...)
		dst = append(dst, "\r\n\r\n"...)
		dst = append(dst, unsafe.Slice(unsafe.StringData(m.Data), len(m.Data))...)
		dst = append(dst, "\r\n"...)
	}
	dst = field(dst, "model", r.Model)
	dst = field(dst, "language", Language)
	if p := Prompt(msgs); p != "" {
		dst = field(dst, "prompt", p)
	}
	dst = field(dst, "response_format", "json")
	if !r.NonStreaming {
		dst = field(dst, "stream", "true")
		dst = field(dst, "stream_include_usage", "true")
	}
	if r.MaxTokens > 0 {
		dst = field(dst, "max_completion_tokens", strconv.Itoa(int(r.MaxTokens)))
	}
	if r.Temperature != nil {
		dst = field(dst, "temperature", strconv.FormatFloat(*r.Temperature, 'g', -1, 64))
	}
	return append(dst, "--"+Boundary+"--\r\n"...)
}

// field appends one form field. Names are the package's own; values are
// written as they are (a prompt is text, and a boundary line in it would
// need 40 given bytes after "--").
func field(dst []byte, name, value string) []byte {
	dst = append(dst, "--"+Boundary+"\r\nContent-Disposition: form-data; name=\""...)
	dst = append(dst, name...)
	dst = append(dst, "\"\r\n\r\n"...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}
