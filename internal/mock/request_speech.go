package mock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/trace"
)

// validShape reports whether s names a transcription stream shape.
func validShape(s string) bool {
	_, ok := transcription.ParseShape(s)
	return ok
}

// parseSpeech reads a /v1/audio/transcriptions or translations request: a
// multipart/form-data body with one file part (the audio) and form
// fields, as vLLM reads them. The prompt field is the request's one user
// message, the file its audio item; a transcript has no reasoning.
func parseSpeech(body []byte, contentType string) (*genRequest, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, &badRequest{status: 400, msg: fmt.Sprintf("Content-Type %q: expected multipart/form-data with a boundary", contentType)}
	}
	req := &genRequest{maxParam: "max_completion_tokens", noReasoning: true}
	var audio []byte
	fields := map[string]string{}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalid("", "request body is not a valid multipart form: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, invalid(p.FormName(), "form part %q: %v", p.FormName(), err)
		}
		switch name := p.FormName(); {
		case name == "file":
			if p.FileName() == "" {
				return nil, invalid("file", "file must be a file upload, not a form value")
			}
			audio = b
		case name != "":
			fields[name] = string(b)
		}
	}
	if audio == nil {
		return nil, invalid("file", "file is required: the audio to transcribe")
	}
	req.Model = fields["model"]
	boolField := func(name string) (bool, error) {
		v, ok := fields[name]
		if !ok {
			return false, nil
		}
		switch strings.ToLower(v) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return false, invalid(name, "%s %q: expected true or false", name, v)
	}
	if req.Stream, err = boolField("stream"); err != nil {
		return nil, err
	}
	if req.IncludeUsage, err = boolField("stream_include_usage"); err != nil {
		return nil, err
	}
	if req.ContinuousUsage, err = boolField("stream_continuous_usage_stats"); err != nil {
		return nil, err
	}
	if (req.IncludeUsage || req.ContinuousUsage) && !req.Stream {
		return nil, invalid("stream_include_usage", "Stream options can only be defined when `stream=True`.")
	}
	if f, ok := fields["response_format"]; ok && f != "json" {
		return nil, invalid("response_format", "response_format %q: the mock answers json only", f)
	}
	if v, ok := fields["max_completion_tokens"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, invalid("max_completion_tokens", "max_completion_tokens %q: expected an integer", v)
		}
		req.MaxTokens = &n
		if err := atLeastOne("max_completion_tokens", req.MaxTokens); err != nil {
			return nil, err
		}
	}
	if v, ok := fields["temperature"]; ok {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return nil, invalid("temperature", "temperature %q: expected a number", v)
		}
	}
	req.msgs = []Message{{Role: "user", Content: fields["prompt"]}}
	req.media = []mediaRef{{msg: 0, param: "file", where: "file", kind: trace.MediaAudio, raw: audio}}
	return req, nil
}
