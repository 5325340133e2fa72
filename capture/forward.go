package capture

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tracekit/tracekit/clock"
	"github.com/tracekit/tracekit/record"
)

// defaultTransport reaches the upstream without timeouts on responses
// (streams are long) and without compression (the client's Accept-Encoding
// passes through; ours is never added).
func defaultTransport(insecure bool) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true, // pass the client's Accept-Encoding, never add ours
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: insecure},
	}
}

// hopHeaders are connection-level headers a proxy must not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k][:0:0], vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	for _, f := range src["Connection"] { // headers the Connection header names
		for _, name := range strings.Split(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
}

func (p *Proxy) upstreamRequest(r *http.Request, body []byte) (*http.Request, error) {
	u := *p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the upstream request: %w", err)
	}
	copyHeaders(out.Header, r.Header)
	if _, ok := r.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // Go would add its own
	}
	out.ContentLength = int64(len(body))
	return out, nil
}

// fwdResult is how one exchange went at the HTTP level.
type fwdResult struct {
	sentNs, headersNs, doneNs int64
	status                    int
	sendErr                   error // no response
	readErr                   error // the upstream body broke off
	clientGone                bool  // writing to the client failed
	sse                       bool
	jsonBody                  []byte // a non-SSE body, bounded, for FeedJSON
	// undecoded names a Content-Encoding the proxy cannot decode (its
	// events are not parsed); decodeErr says why a compressed body could
	// not be decoded.
	undecoded string
	decodeErr error
}

// exchange is one recorded LLM call in flight.
type exchange struct {
	arrival int64
	stream  *record.Stream
	res     fwdResult
	header  func(string) string
}

// maxJSONBody bounds the non-streaming body kept for parsing.
const maxJSONBody = 16 << 20

// forward sends out upstream and copies the response to w as it arrives:
// each read is written and flushed before anything else is done with it.
// With ex set, each read is then stamped and parsed.
func (p *Proxy) forward(w http.ResponseWriter, out *http.Request, ex *exchange) fwdResult {
	var res fwdResult
	res.sentNs = clock.Mono()
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		res.sendErr, res.doneNs = err, clock.Mono()
		if out.Context().Err() != nil {
			res.clientGone = true
			return res
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		msg, _ := json.Marshal("tracekit capture: upstream unreachable: " + err.Error())
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"upstream_error","code":502}}`, msg)
		return res
	}
	defer resp.Body.Close()
	res.headersNs = clock.Mono()
	res.status = resp.StatusCode
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	rc.Flush()
	ct := resp.Header.Get("Content-Type")
	res.sse = strings.HasPrefix(ct, "text/event-stream")
	parse := ex != nil
	consume := func(b []byte, t int64) {
		if res.sse {
			ex.stream.Feed(b, t)
		} else if len(res.jsonBody)+len(b) <= maxJSONBody {
			res.jsonBody = append(res.jsonBody, b...)
		}
	}
	var dec *decoder
	if enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); parse && enc != "" && enc != "identity" {
		if decodable(enc) {
			dec = startDecoder(enc, consume)
			defer dec.finish()
		} else {
			parse, res.undecoded = false, enc
		}
	}
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		t := clock.Mono()
		if n > 0 && !res.clientGone {
			if _, werr := w.Write(buf[:n]); werr != nil {
				res.clientGone = true
			} else if ferr := rc.Flush(); ferr != nil {
				res.clientGone = true
			}
		}
		if n > 0 && parse {
			if dec != nil {
				dec.feed(buf[:n], t)
			} else {
				consume(buf[:n], t)
			}
		}
		if dec != nil && (err != nil || res.clientGone) {
			res.decodeErr = dec.finish()
		}
		if err != nil {
			res.doneNs = t
			if err != io.EOF {
				res.readErr = err
				// The client's going away cancels the upstream request:
				// tell that apart from the upstream breaking off.
				res.clientGone = res.clientGone || out.Context().Err() != nil
			}
			if parse && !res.sse && err == io.EOF {
				ex.stream.FeedJSON(res.jsonBody, t)
			}
			return res
		}
		if res.clientGone {
			// Stop reading: the client went away, and canceling its
			// request context aborts the upstream request.
			res.doneNs = t
			return res
		}
	}
}

// CheckUpstream asks the upstream for its base URL once, marked as a probe
// (ProbeHeader), through the proxy's transport: any HTTP answer, whatever
// its status, means the upstream is reachable (dial, TLS and HTTP all
// work); the error says what failed otherwise.
func (p *Proxy) CheckUpstream(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.upstream.String(), nil)
	if err != nil {
		return fmt.Errorf("checking upstream %s: %w", p.target, err)
	}
	req.Header.Set(ProbeHeader, "1")
	resp, err := p.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("upstream %s is not reachable: %w", p.target, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}
