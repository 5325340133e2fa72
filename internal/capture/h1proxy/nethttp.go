package h1proxy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// stdServer is the NetHTTP stack: net/http's server in front and the
// forwarder's http.RoundTripper behind, driving the same Tap as the
// Native stack. It is a reference for the Native stack, and the fallback
// where that one misbehaves: standard parsing and connection
// handling, at the price of net/http's per-request allocations and
// goroutine hops.
type stdServer struct {
	f     *forwarder
	srv   *http.Server
	done  chan struct{} // closed when Serve returned
	conns sync.WaitGroup
	// cut is canceled when Shutdown's grace is up: every upstream
	// request still running ends then.
	cut    context.Context
	cutNow context.CancelFunc
}

// startStd serves ln with the NetHTTP stack.
func startStd(f *forwarder, ln net.Listener) *stdServer {
	s := &stdServer{f: f, done: make(chan struct{})}
	s.cut, s.cutNow = context.WithCancel(context.Background())
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: headerTimeout,
		MaxHeaderBytes:    maxRequestHead,
		ErrorLog:          log.New(logfWriter(f.logf), "capture: ", 0),
		// Every connection is counted from its start (in Serve's
		// goroutine) to its end, after its last handler returned, so that
		// shutdown can wait for them: http.Server.Close does not.
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.conns.Done()
			}
		},
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s
}

// shutdown stops accepting, lets requests in flight end for up to grace,
// then cuts them, and returns once every connection ended.
func (s *stdServer) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	err := s.srv.Shutdown(ctx)
	cancel()
	<-s.done // no connection starts after this
	if err != nil {
		s.srv.Close() // the clients first: a request cut must not be answered
		s.cutNow()
	}
	s.conns.Wait()
	s.cutNow()
}

// ServeHTTP forwards one request, as the Native stack's serve does.
func (s *stdServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrival := clock.Mono()
	f := s.f
	var x Exchange
	if f.tap != nil {
		x = f.tap.Open(r, arrival)
	}
	// A watched request's body is read whole (bounded); others stream
	// upstream as they arrive.
	var body []byte
	if x != nil && r.ContentLength != 0 {
		var status int
		var err error
		if body, status, err = readBody(r, f.maxBody); err != nil {
			w.Header().Set("Connection", "close")
			stdJSONError(w, status, "invalid_request_error", "tracekit capture: "+err.Error())
			x.End(Outcome{SendErr: err, DoneNs: clock.Mono()})
			return
		}
	}
	if x != nil {
		x.Body(body)
	}
	// The upstream request ends when the client goes away (net/http
	// cancels r's context) or when shutdown cuts it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.cut, cancel)()
	res := s.forward(ctx, w, r, body, x)
	if x != nil {
		x.End(res)
	}
	if res.ReadErr != nil && res.Status != 0 || res.SendErr != nil && res.ClientGone {
		// The upstream broke off: so does the client's response (net/http
		// closes the connection without ending the body). A client gone
		// before any response gets none (net/http would answer 200).
		panic(http.ErrAbortHandler)
	}
}

// forward sends r upstream and copies the response to w as it arrives:
// each read is written and flushed before the tap is told it.
func (s *stdServer) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte, x Exchange) Outcome {
	var res Outcome
	f := s.f
	out, err := f.upstreamRequest(ctx, r, body, x == nil)
	if err != nil {
		stdJSONError(w, http.StatusBadRequest, "invalid_request_error", "tracekit capture: "+err.Error())
		res.SendErr, res.DoneNs = err, clock.Mono()
		return res
	}
	res.SentNs = clock.Mono()
	resp, err := f.rt.RoundTrip(out)
	if err != nil {
		res.SendErr, res.DoneNs = err, clock.Mono()
		if ctx.Err() != nil {
			res.ClientGone = true
			return res
		}
		msg, _ := json.Marshal("tracekit capture: upstream unreachable: " + err.Error())
		stdJSONBody(w, http.StatusBadGateway, `{"error":{"message":`+string(msg)+`,"type":"upstream_error","code":502}}`)
		return res
	}
	defer resp.Body.Close()
	stamp := clock.Mono()
	res.Status = resp.StatusCode
	h := w.Header()
	copyHeaders(h, resp.Header)
	// What net/http's server would add on its own is suppressed: the
	// client gets the upstream's headers, no others.
	for _, k := range [...]string{"Content-Type", "Date"} {
		if _, ok := resp.Header[k]; !ok {
			h[k] = nil
		}
	}
	if x != nil {
		x.Response(Response{Status: resp.StatusCode, Stamp: stamp, EventStream: isSSE(resp.Header), Encoding: resp.Header.Get("Content-Encoding")})
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil { // the head at once: a stream's first event may take long
		res.ClientGone = true
	}
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	buf := *bp
	var t int64
	for !res.ClientGone {
		n, err := resp.Body.Read(buf)
		t = clock.Mono()
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				res.ClientGone = true
			}
			if x != nil {
				x.Read(buf[:n], t)
			}
		}
		if err == io.EOF {
			res.Complete = true
			break
		}
		if err != nil {
			res.ReadErr = err
			break
		}
	}
	if t == 0 {
		t = clock.Mono()
	}
	res.DoneNs = t
	if !res.Complete && ctx.Err() != nil {
		res.ClientGone = true
	}
	return res
}

// stdJSONError answers with status and an OpenAI-style JSON error, as
// clientWriter.jsonError does.
func stdJSONError(w http.ResponseWriter, status int, typ, msg string) {
	q, _ := json.Marshal(msg)
	stdJSONBody(w, status, `{"error":{"message":`+string(q)+`,"type":"`+typ+`","code":`+strconv.Itoa(status)+`}}`)
}

func stdJSONBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// logfWriter carries net/http's server log lines to Logf.
type logfWriter func(format string, args ...any)

func (l logfWriter) Write(p []byte) (int, error) {
	l("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
