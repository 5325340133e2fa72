package transcription

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// maxFormValue bounds a form field capture keeps (a prompt): the audio
// is the only large part of an upload.
const maxFormValue = 1 << 20

// ParseRequest reads a multipart/form-data upload (the inverse of
// AppendRequest) into one user message: the "prompt" field as its text
// and the "file" part as its audio item (api.ReadItem: a WAV clip, the one
// audio format a trace describes; a clip of another format is an error,
// so the request is not recorded); also model, stream ("true"), and
// max_completion_tokens. language, response_format and temperature have
// no place in a trace: replay sends language en and response_format json.
// The boundary is read from the body's first line, where every client
// puts it (a body opening with a preamble is refused): the parser sees the
// body alone, not its Content-Type.
func ParseRequest(body []byte) (*api.Call, error) {
	line, _, ok := bytes.Cut(body, []byte("\r\n"))
	boundary, found := bytes.CutPrefix(line, []byte("--"))
	if !ok || !found || len(boundary) == 0 || len(boundary) > 70 {
		return nil, errors.New("not a multipart/form-data body: it does not open with a boundary line")
	}
	r := multipart.NewReader(bytes.NewReader(body), string(bytes.TrimRight(boundary, " \t")))
	c := &api.Call{}
	msg := trace.Message{Role: "user"}
	var audio *trace.Media
	for {
		p, err := r.NextRawPart() // as sent: no transfer decoding
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
		name := p.FormName()
		if name == "file" {
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, fmt.Errorf("multipart part file: %w", err)
			}
			it, err := api.ReadItem(b)
			switch {
			case err != nil:
				return nil, fmt.Errorf("part file (%s): %w", p.Header.Get("Content-Type"), err)
			case it.Kind != trace.MediaAudio:
				return nil, fmt.Errorf("part file: a %s %s, not an audio clip", it.Format, it.Kind)
			}
			audio = &it
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormValue+1))
		if err != nil {
			return nil, fmt.Errorf("multipart part %s: %w", name, err)
		}
		if len(v) > maxFormValue {
			return nil, fmt.Errorf("multipart part %s: more than %d bytes", name, maxFormValue)
		}
		switch s := string(v); name {
		case "model":
			c.Model = s
		case "prompt":
			msg.Content = s
		case "stream":
			c.Stream = s == "true" || s == "True" || s == "1"
		case "max_completion_tokens", "max_tokens":
			if n, err := strconv.ParseInt(s, 10, 32); err == nil && n > 0 {
				c.MaxTokens = int32(n)
			}
		}
	}
	if audio == nil {
		return nil, errors.New("no file part: an upload without audio")
	}
	msg.Media = []trace.Media{*audio}
	c.Messages = []trace.Message{msg}
	return c, nil
}
