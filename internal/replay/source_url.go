package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// A trace given as an http(s) URL (a Kubernetes pod has no copy of its
// own) is downloaded once into a temporary file beside the outputs,
// verified as a trace before anything else happens, replayed from there
// and removed after. Its address may carry credentials (userinfo, a
// presigned query): only RedactURL's form reaches messages and metadata.

// IsURL reports whether a trace argument is an http:// or https:// URL.
func IsURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// redacted replaces a credential in a URL.
const redacted = "REDACTED"

// RedactURL returns raw without credentials: the userinfo becomes
// "REDACTED", so does every query value (presigned URLs carry their
// signature there; the keys stay, to say what was sent), and the fragment
// is dropped. A string that does not parse as a URL is replaced whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<unparseable URL>"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		// url.Values.Encode sorts the keys: stable, and nothing of the
		// original order (or any value) survives.
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// redactURLArg redacts an argument that is, or ends in (--flag=URL), a URL
// with credentials; other arguments are returned as they are.
func redactURLArg(a string) string {
	i := strings.Index(a, "://")
	if i < 0 {
		return a
	}
	start := strings.LastIndexAny(a[:i], "= ") + 1
	u := a[start:]
	if !strings.ContainsAny(u, "@?#") {
		return a
	}
	return a[:start] + RedactURL(u)
}

// FetchOptions bound a trace download.
type FetchOptions struct {
	// Dir is where the temporary files are made (the output's directory).
	Dir string
	// MaxBytes is the largest body accepted, the trace's and its media
	// file's each; a larger one fails before or while downloading.
	// Required (> 0).
	MaxBytes int64
	// IdleTimeout is the longest the download may go without receiving a
	// byte, the response headers included. Default 60 s.
	IdleTimeout time.Duration
	// MediaURL is where the trace's media file is, when the trace carries
	// real media items (trace.Media.Hash); empty: the trace's URL with
	// trace.MediaFileSuffix added to its path (its query, a presigned
	// URL's signature, would not fit another object: give MediaURL then).
	MediaURL string
	// NoMedia skips the media file: the caller has it (Config.MediaFile).
	NoMedia bool
	// Client does the request; nil: a client with the environment's proxy
	// settings and the usual TLS verification.
	Client *http.Client
}

// FetchError is a failed trace download. URL is redacted; Input is true
// when the fault is the address or what it serves (an HTTP 4xx, a body
// larger than MaxBytes, a body that is not a trace), false for transport
// failures and server errors that a retry could cure. What is the file
// it was after: "trace" or "media file".
type FetchError struct {
	What  string
	URL   string
	Input bool
	Err   error
}

func (e *FetchError) Error() string { return e.What + " " + e.URL + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// FetchTrace downloads the trace at rawURL into a temporary file in
// opts.Dir, checks that it opens as a tracekit trace, and returns its path
// and the function that removes it. A trace that carries real media items
// brings its media file too (opts.MediaURL), beside the copy where replay
// looks for it (trace.MediaPath), checked to hold every item; remove
// removes both. On error nothing is left behind.
func FetchTrace(ctx context.Context, rawURL string, opts FetchOptions) (path string, remove func(), err error) {
	if opts.MaxBytes <= 0 {
		return "", nil, &FetchError{What: "trace", URL: RedactURL(rawURL), Input: true, Err: fmt.Errorf("MaxBytes %d: expected a positive limit", opts.MaxBytes)}
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second
	}
	if opts.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = opts.IdleTimeout
		tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
		opts.Client = &http.Client{Transport: tr}
	}
	tmp, err := download(ctx, "trace", rawURL, opts, func(tmp string, n int64) error {
		tr, err := trace.OpenTrace(tmp)
		if err != nil {
			return fmt.Errorf("the %d bytes downloaded are not a tracekit trace: %w", n, stripPath(err, tmp))
		}
		return tr.Close()
	})
	if err != nil {
		return "", nil, err
	}
	removeTmp := func() { os.Remove(tmp) }
	var refs []mediaRef
	if !opts.NoMedia {
		if refs, err = realMediaOf(tmp); err != nil {
			removeTmp()
			return "", nil, &FetchError{What: "trace", URL: RedactURL(rawURL), Input: true, Err: stripPath(err, tmp)}
		}
	}
	if len(refs) > 0 && !opts.NoMedia {
		if err := fetchMedia(ctx, rawURL, tmp, refs, opts); err != nil {
			removeTmp()
			return "", nil, err
		}
		removeTmp = func() { os.Remove(tmp); os.Remove(trace.MediaPath(tmp)) }
	}
	var once sync.Once
	return tmp, func() { once.Do(removeTmp) }, nil
}

// realMediaOf lists the real media items of the trace at path, each with
// the first turn that carries it.
func realMediaOf(path string) ([]mediaRef, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []mediaRef
	seen := map[string]bool{}
	for row := int64(0); ; {
		conv, err := f.Next()
		if err != nil {
			// io.EOF, or a damaged row, which the run meets where it
			// reaches it (as checkEndpoints does).
			return refs, nil
		}
		refs = appendRealMedia(refs, seen, conv, row)
		row += int64(len(conv))
	}
}

// fetchMedia downloads the media file of the trace downloaded from
// traceURL to tracePath, beside it, and checks that it holds every item
// of refs.
func fetchMedia(ctx context.Context, traceURL, tracePath string, refs []mediaRef, opts FetchOptions) error {
	mediaURL := opts.MediaURL
	if mediaURL == "" {
		u, err := url.Parse(traceURL)
		if err != nil {
			return &FetchError{What: "trace", URL: RedactURL(traceURL), Input: true, Err: errors.New("expected an http:// or https:// URL")}
		}
		u.Path += trace.MediaFileSuffix
		u.RawPath = ""
		mediaURL = u.String()
	}
	first := refs[0]
	why := fmt.Sprintf("conversation %q turn %d (row %d) of the trace carries a real media item (sha256 %s)", first.conv, first.turn, first.row, first.hash)
	tmp, err := download(ctx, "media file", mediaURL, opts, func(tmp string, n int64) error {
		s, err := trace.OpenMediaFile(tmp)
		if err != nil {
			return fmt.Errorf("the %d bytes downloaded are not a tracekit media file: %w", n, stripPath(err, tmp))
		}
		defer s.Close()
		for _, ref := range refs {
			if _, ok := s.Has(ref.hash); !ok {
				return fmt.Errorf("it does not hold the item (sha256 %s) of conversation %q turn %d (row %d)", ref.hash, ref.conv, ref.turn, ref.row)
			}
		}
		return nil
	})
	if err != nil {
		var fe *FetchError
		if errors.As(err, &fe) {
			fe.Err = fmt.Errorf("%w (%s)", fe.Err, why)
		}
		return err
	}
	if err := os.Rename(tmp, trace.MediaPath(tracePath)); err != nil {
		os.Remove(tmp)
		return &FetchError{What: "media file", URL: RedactURL(mediaURL), Err: fmt.Errorf("placing it beside the trace: %w", err)}
	}
	return nil
}

// download fetches rawURL into a temporary file in opts.Dir, bounded by
// opts.MaxBytes and opts.IdleTimeout, and checks it with verify; what
// names the file in errors. On error nothing is left behind.
func download(ctx context.Context, what, rawURL string, opts FetchOptions, verify func(tmp string, n int64) error) (string, error) {
	shown := RedactURL(rawURL)
	fail := func(input bool, format string, a ...any) (string, error) {
		return "", &FetchError{What: what, URL: shown, Input: input, Err: fmt.Errorf(format, a...)}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fail(true, "expected an http:// or https:// URL")
	}
	req.Header.Set(ProbeHeader, "1") // not traffic: a capture proxy in between must not record it
	resp, err := opts.Client.Do(req)
	if err != nil {
		return fail(false, "downloading: %w", stripURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode/100 == 4, "the server answered %s, expected 200 OK", resp.Status)
	}
	if resp.ContentLength > opts.MaxBytes {
		return fail(true, "%d bytes, above the limit of %d (raise it to download this %s)", resp.ContentLength, opts.MaxBytes, what)
	}

	f, err := os.CreateTemp(opts.Dir, ".tracekit-trace-*.download")
	if err != nil {
		return fail(false, "creating the temporary file: %w", err)
	}
	tmp := f.Name()
	// Every read re-arms the idle watchdog; a silent server is cut off.
	idle := time.AfterFunc(opts.IdleTimeout, func() {
		cancel(fmt.Errorf("no data for %v", opts.IdleTimeout))
	})
	n, err := io.Copy(f, &idleReader{r: io.LimitReader(resp.Body, opts.MaxBytes+1), t: idle, d: opts.IdleTimeout})
	idle.Stop()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		os.Remove(tmp)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		return fail(false, "downloading (after %d bytes): %w", n, stripURL(err))
	case n > opts.MaxBytes:
		os.Remove(tmp)
		return fail(true, "more than the limit of %d bytes (raise it to download this %s)", opts.MaxBytes, what)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		os.Remove(tmp)
		return fail(false, "the body ended after %d of %d bytes", n, resp.ContentLength)
	}
	if err := verify(tmp, n); err != nil {
		os.Remove(tmp)
		return fail(true, "%w", err)
	}
	return tmp, nil
}

// idleReader re-arms t to d before every read.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.t.Reset(r.d)
	return r.r.Read(p)
}

// stripURL replaces a *url.Error (whose text holds the address, query
// included) by its cause.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// stripPath says "the download" where an error names the temporary file.
type pathless struct {
	err       error
	path, say string
}

func (e pathless) Error() string { return strings.ReplaceAll(e.err.Error(), e.path, e.say) }
func (e pathless) Unwrap() error { return e.err }

func stripPath(err error, path string) error { return pathless{err, path, "the download"} }

// shownTargets are the targets as a recording holds them: each through
// RedactURL, so a target given with user:password keeps them out of files.
func shownTargets(targets []string) []string {
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = RedactURL(t)
	}
	return out
}
