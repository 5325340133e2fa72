package mock

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// mediaRef is one media item of a request as its API gave it: in a
// message, of a kind the part's type names, with its bytes either at a
// URL (a data URI or http(s)) or as bare base64 (chat's input_audio).
type mediaRef struct {
	msg    int    // index in genRequest.msgs
	param  string // the request field it is in: messages, or input
	where  string // the part, for errors: messages[0].content[1].image_url
	kind   string // trace.MediaImage, MediaVideo or MediaAudio
	url    string
	data   string // bare base64 when url is ""
	format string // input_audio's format
	raw    []byte // the bytes themselves (a multipart upload), when not nil
}

// mediaItem is a resolved mediaRef: what the prompt is charged for it.
type mediaItem struct {
	msg    int
	kind   string // trace.MediaImage, MediaVideo or MediaAudio
	tokens int
	bytes  int
	sum    string // hex SHA-256 of the bytes: the item's part of the prefix hash
	ms     int64  // an audio clip's duration in milliseconds
}

// mediaFetcher gets the bytes of media given by http(s) URL: with a bounded
// client and a size cap, as a server fetches them (vLLM fails the request
// with a 400 when a URL cannot be fetched).
type mediaFetcher struct {
	client   *http.Client
	maxBytes int64
	// probes bounds the items decoded at once: an image is decoded to
	// pixels to check it (several times its encoded size), and a thousand
	// large images arriving together would hold them all at once.
	probes chan struct{}
	// check is media.Probe, or media.ProbeHeader (Config.MediaCheck).
	check func([]byte) (media.Info, error)
}

// The values of Config.MediaCheck.
const (
	MediaCheckFull   = "full"
	MediaCheckHeader = "header"
)

func newMediaFetcher(timeout time.Duration, maxBytes int64, check string) *mediaFetcher {
	f := &mediaFetcher{client: &http.Client{Timeout: timeout}, maxBytes: maxBytes,
		probes: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))), check: media.Probe}
	if check == MediaCheckHeader {
		f.check = media.ProbeHeader
	}
	return f
}

// probe checks b (media.Probe, or its header alone), once a decoding slot is free (or ctx ends).
func (f *mediaFetcher) probe(ctx context.Context, b []byte) (media.Info, error) {
	select {
	case f.probes <- struct{}{}:
	case <-ctx.Done():
		return media.Info{}, ctx.Err()
	}
	defer func() { <-f.probes }()
	return f.check(b)
}

func (f *mediaFetcher) fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return nil, fmt.Errorf("fetching %s: timed out after %v", url, f.client.Timeout)
		}
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: HTTP %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	if int64(len(b)) > f.maxBytes {
		return nil, fmt.Errorf("fetching %s: more than %d bytes", url, f.maxBytes)
	}
	return b, nil
}

// decodeBase64 decodes standard base64 strictly (with padding, no stray
// characters), as vLLM decodes media with validation on.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("invalid base64 at character %d", int64(ce))
		}
		return nil, fmt.Errorf("invalid base64: %w", err)
	}
	return b, nil
}

// mediaBytes gets a reference's bytes: a data URI's base64 payload, an
// http(s) URL's body, or bare base64.
func (f *mediaFetcher) mediaBytes(ctx context.Context, r *mediaRef) ([]byte, error) {
	if r.raw != nil {
		return r.raw, nil
	}
	if r.url == "" {
		if r.data == "" {
			return nil, errors.New("no data")
		}
		return decodeBase64(r.data)
	}
	switch scheme, rest, _ := strings.Cut(r.url, ":"); strings.ToLower(scheme) {
	case "data":
		head, payload, ok := strings.Cut(rest, ",")
		if !ok {
			return nil, errors.New("data URI without a comma before its data")
		}
		if !strings.HasSuffix(strings.ToLower(head), ";base64") {
			return nil, fmt.Errorf("data URI %q: only base64 data is supported", "data:"+head)
		}
		return decodeBase64(payload)
	case "http", "https":
		return f.fetch(ctx, r.url)
	case "file":
		return nil, errors.New("file URLs are not served (a server reads them only from an allowed local path)")
	default:
		return nil, fmt.Errorf("URL %q: expected a data URI or an http(s) URL", short(r.url))
	}
}

// short cuts a long string for an error message.
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// resolveMedia gets, checks and counts every media item of a request: a
// 400 naming the part for one that cannot be read, as vLLM answers one it
// cannot load.
func (f *mediaFetcher) resolveMedia(ctx context.Context, refs []mediaRef) ([]mediaItem, error) {
	items := make([]mediaItem, 0, len(refs))
	for i := range refs {
		r := &refs[i]
		b, err := f.mediaBytes(ctx, r)
		if err != nil {
			return nil, invalid(r.param, "%s: %v", r.where, err)
		}
		if r.format != "" && r.format != "wav" {
			return nil, invalid(r.param, "%s: audio format %q is not read by the mock (wav is)", r.where, r.format)
		}
		info, err := f.probe(ctx, b)
		if err != nil {
			return nil, invalid(r.param, "%s: %v", r.where, err)
		}
		if info.Kind != r.kind {
			return nil, invalid(r.param, "%s: expected %s, the data is %s %s", r.where, article(r.kind), article(info.Kind), info.Format)
		}
		n, err := media.Tokens(info)
		if err != nil {
			return nil, invalid(r.param, "%s: %v", r.where, err)
		}
		sum := sha256.Sum256(b)
		it := mediaItem{msg: r.msg, kind: info.Kind, tokens: n, bytes: len(b), sum: hex.EncodeToString(sum[:])}
		if info.Kind == trace.MediaAudio && info.SampleRate > 0 {
			it.ms = info.Samples * 1000 / int64(info.SampleRate)
		}
		items = append(items, it)
	}
	return items, nil
}

func article(kind string) string {
	switch kind {
	case trace.MediaImage:
		return "an image"
	case trace.MediaAudio:
		return "an audio clip"
	}
	return "a " + kind
}
