package replay

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// target is one server: its base URL and its client.
type target struct {
	base     string // as given, without a trailing "/" or "/v1"
	shown    string // base as recorded: credentials in it redacted (RedactURL)
	genURL   string // the generation endpoint
	cl       *h1Client
	auth     string              // "Bearer <key>" or empty; never logged
	key      string              // the API key alone, Messages' x-api-key; never logged
	urls     map[Endpoint]string // each endpoint's URL: base + apiPaths
	headers  map[string]string
	bodyOpts *bodyOptions
}

// newTarget builds the client for base.
func newTarget(base string, c *Config, conns *connSet, bo *bodyOptions) (*target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fieldErr("Targets", "parsing %s %q: %w", fielderr.Name("Targets"), base, err)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	path := "/v1/chat/completions" // the probe's: chat unless the run's encoding is completions
	if c.Endpoint == EndpointCompletions {
		path = "/v1/completions"
	}
	var tlsCfg *tls.Config
	if u.Scheme == "https" {
		tlsCfg = &tls.Config{ServerName: u.Hostname(), InsecureSkipVerify: c.Insecure, NextProtos: []string{"http/1.1"}}
	}
	t := &target{
		base:    base,
		shown:   RedactURL(base),
		genURL:  base + path,
		headers: c.Headers,
		// The pool's connections idle longer than IdleConnTimeout are
		// closed, never reused.
		cl:       &h1Client{addr: host, dial: conns.dialer(tlsCfg), idleTimeout: c.IdleConnTimeout},
		bodyOpts: bo,
	}
	if c.APIKey != "" {
		t.auth, t.key = "Bearer "+c.APIKey, c.APIKey
	}
	t.urls = make(map[Endpoint]string, len(apiPaths))
	for ep, p := range apiPaths {
		t.urls[ep] = base + p
	}
	return t, nil
}

// do sends req through t and reads the response headers (the body is
// streamed), with deadline bounding the whole exchange when not zero. A
// request that went out on a reused keep-alive connection and got EOF or a
// reset before any response byte (the server had closed the connection
// while it sat idle: uvicorn does after 5 s) is sent once more, at once,
// on a fresh connection, with X-Request-Id retryID when not empty;
// retried reports it. A failure after a response byte is never retried,
// nor is one on a fresh connection.
func (t *target) do(req *fasthttp.Request, resp *h1Resp, deadline time.Time, retryID string) (retried bool, err error) {
	c, err := t.cl.get()
	if err != nil {
		return false, err
	}
	err = t.cl.roundTrip(c, req, resp, deadline)
	if err == nil || !closedBeforeAnswer(err) || !c.reusedWithoutAnswer() || c.set.canceled.Load() {
		return false, err
	}
	// The retry's connection is closed after it (Connection: close): a
	// server that closed one idle connection closes others, and the next
	// request had better dial anew than find another dead one.
	if retryID != "" {
		req.Header.Set("X-Request-Id", retryID)
	}
	if c, err = t.cl.dialConn(); err != nil {
		return true, err
	}
	req.SetConnectionClose()
	err = t.cl.roundTrip(c, req, resp, deadline)
	req.Header.ResetConnectionClose()
	return true, err
}

// closedBeforeAnswer reports whether err is the peer closing or resetting
// the connection before the first response byte.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// prepare fills req with a request to uri with t's headers. A request
// without a requestID is not traffic and carries ProbeHeader.
func (t *target) prepare(req *fasthttp.Request, method, uri, requestID string) {
	req.Reset()
	req.SetRequestURI(uri)
	req.Header.SetMethod(method)
	if t.auth != "" {
		req.Header.Set("Authorization", t.auth)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	} else {
		req.Header.Set(ProbeHeader, "1")
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
}

// simple performs a small non-streaming exchange (ready check, model list,
// cache reset) and returns the status and up to 1 MiB of body.
func (t *target) simple(method, path string, body []byte, timeout time.Duration) (int, []byte, error) {
	req, resp := fasthttp.AcquireRequest(), new(h1Resp)
	defer fasthttp.ReleaseRequest(req)
	t.prepare(req, method, t.base+path, "")
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	if _, err := t.do(req, resp, time.Now().Add(timeout), ""); err != nil {
		return 0, nil, fmt.Errorf("%s %s%s: %w", method, t.base, path, err)
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body(), 1<<20))
	resp.close(err)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer to %s %s%s: %w", method, t.base, path, err)
	}
	return resp.StatusCode(), out, nil
}

// waitReady polls /health, then /v1/models, until one answers 2xx or the
// timeout passes, as vLLM's benchmark does before it starts the clock.
func (t *target) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := clock.Mono() + int64(timeout)
	var last error
	for {
		for _, p := range []string{"/health", "/v1/models"} {
			status, _, err := t.simple("GET", p, nil, 5*time.Second)
			if err == nil && status/100 == 2 {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("GET %s%s: HTTP %d", t.base, p, status)
			}
			last = err
		}
		if clock.Mono() >= deadline {
			return fmt.Errorf("target %s not ready after %v: %w", t.base, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// firstModel returns the id of the first model /v1/models lists.
func (t *target) firstModel() (string, error) {
	status, body, err := t.simple("GET", "/v1/models", nil, 10*time.Second)
	if err != nil {
		return "", fieldErr("Model", "discovering the model (give %s to skip): %w", fielderr.Name("Model"), err)
	}
	if status/100 != 2 {
		return "", fieldErr("Model", "discovering the model (give %s to skip): GET %s/v1/models: HTTP %d", fielderr.Name("Model"), t.base, status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fieldErr("Model", "discovering the model (give %s to skip): GET %s/v1/models: expected {\"data\":[{\"id\":...}]}, got %s", fielderr.Name("Model"), t.base, snippetOf(body))
	}
	return list.Data[0].ID, nil
}

// resetPrefixCache asks a vLLM/SGLang server to drop its prefix cache.
func (t *target) resetPrefixCache() error {
	status, body, err := t.simple("POST", "/reset_prefix_cache", nil, 30*time.Second)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("POST %s/reset_prefix_cache: HTTP %d %s (vLLM needs VLLM_SERVER_DEV_MODE=1)", t.base, status, snippetOf(body))
	}
	return nil
}

// ProbeHeader marks every request replay sends that is not traffic (the
// pre-run probe, /v1/models, ready checks, the prefix-cache reset): the
// capture proxy forwards such requests but never records them.
const ProbeHeader = "X-Tracekit-Probe"

// probeResult is what one pre-run probe request saw.
type probeResult struct {
	status int
	body   []byte       // the start of a non-2xx body
	rec    trace.Record // the parsed stream of a 2xx answer
	// verdict and verdictMsg are the parser's finding on that stream.
	verdict    trace.ErrorKind
	verdictMsg string
}

// probe sends the run's kind of request, tiny (2 tokens), streamed, with
// or without continuous_usage_stats, and parses the answer.
func (t *target) probe(model string, usage bool, timeout time.Duration) (probeResult, error) {
	var res probeResult
	bo := *t.bodyOpts
	bo.continuousUsage, bo.ignoreEOS = usage, false
	req, resp := fasthttp.AcquireRequest(), new(h1Resp)
	defer fasthttp.ReleaseRequest(req)
	t.prepare(req, "POST", t.genURL, "")
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Accept-Encoding", "identity")
	req.SetBody(bo.appendBody(nil, model, nil, probeMessages, 2, false))
	if _, err := t.do(req, resp, time.Now().Add(timeout), ""); err != nil {
		return res, fmt.Errorf("POST %s: %w", t.genURL, err)
	}
	res.status = resp.StatusCode()
	body := resp.Body()
	defer resp.close(nil) // pooled only when the body was read to its end
	if res.status/100 != 2 {
		res.body, _ = io.ReadAll(io.LimitReader(body, 4<<10))
		return res, nil
	}
	if ct := resp.Header.ContentType(); bytes.HasPrefix(ct, []byte("application/json")) {
		b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
		return res, fmt.Errorf("POST %s: the server answered without streaming (Content-Type: %s): %s", t.genURL, ct, snippetOf(bytes.TrimSpace(b)))
	}
	if enc := resp.Header.ContentEncoding(); len(enc) > 0 && !bytes.EqualFold(enc, []byte("identity")) {
		var d decoders
		dec, err := d.decode(enc, body, func() int64 { return 0 })
		if err != nil {
			return res, fmt.Errorf("POST %s: %w", t.genURL, err)
		}
		body = dec
	}
	st := record.NewStream(nil)
	err := st.ReadBody(body, make([]byte, 4<<10), func() int64 { return 0 })
	st.Fill(&res.rec)
	res.verdict, res.verdictMsg = st.Verdict()
	if err != nil {
		return res, fmt.Errorf("reading the answer to POST %s: %w", t.genURL, err)
	}
	return res, nil
}

// snippetOf quotes the start of a body for an error message.
func snippetOf(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q...", b[:200])
	}
	return fmt.Sprintf("%q", b)
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
