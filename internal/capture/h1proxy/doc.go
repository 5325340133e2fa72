// Package h1proxy is the recording proxy's HTTP layer (tracekit capture):
// a reverse proxy that forwards every request to one upstream untouched
// and every response back as it arrives, each upstream read written to
// the client at once, and tells a Tap what it forwarded. It records
// nothing itself: deciding what to record, and recording it, is the tap's
// (package capture).
//
// In: client connections on a listener (Listen), HTTP/1.x requests on
// them. Out: those requests to Config.Upstream (http or https), their
// responses to the clients, and for each exchange the Tap watches (Open):
// the request's head and whole body, the response's head, each read of
// the response body with its stamp, and how it ended (tap.go). Config.Stack
// chooses the implementation; both forward the same bytes and tell the
// tap the same things.
//
// Native, the default: its own HTTP/1.1 stack.
//
//	client ──> nativeServer (server.go, conn.go: one goroutine per connection;
//	              │ request heads by net/http's ReadRequest, responses written
//	              │ by clientWriter; watch.go notices a client that goes away)
//	              │ forwarder.serve (forward.go) ──> rawForward: own HTTP/1.1 client
//	              │                                 (upstream.go pool) for plain http
//	              │                              or rtForward: http.RoundTripper
//	              │                                 (https, Config.Transport)
//	              │ upstream connections (Linux): raw sockets an evloop owns for their
//	              │ whole life (loop_linux.go, own epoll, edge-triggered, never on the
//	              │ runtime's poller; the idle loop waits for its epoll descriptor on
//	              │ the runtime's poller); the request's goroutine writes the request;
//	              │ the evloop reads the response: a plain head (head.go) it parses and
//	              │ writes with the first events, any other it hands back for net/http
//	              │ to read; the body: each upstream arrival read once, written to the
//	              │ client socket as it is (chunked framing passed through, scanned in
//	              │ place by package chunked), then told to the tap; a slow client's body,
//	              │ an encoded one (and every body elsewhere than Linux, through
//	              │ net.Conn) is forwarded the same way by its request's goroutine
//	              v
//	          Tap / Exchange (tap.go)
//
// NetHTTP: net/http's server in front and an http.RoundTripper behind
// (nethttp.go), driving the same tap: a reference for the native stack,
// and a fallback.
//
// Goroutines (Native): the accept loop and one per client connection
// (ended by Shutdown, which closes idle connections at once and cuts the
// rest after its grace), one evloop (ended by Shutdown once no handler
// runs), one disconnect watcher per response in flight (ended by its
// forward). NetHTTP: net/http's, ended by Shutdown the same way. Once
// Shutdown returns, none is left and the idle upstream connections are
// closed.
package h1proxy
