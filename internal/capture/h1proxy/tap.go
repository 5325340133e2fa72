package h1proxy

import "net/http"

// Tap is told what the proxy forwards: for each request it decides
// whether to watch the exchange, and the Exchange it returns is told the
// rest. Both stacks call it the same way.
type Tap interface {
	// Open is called for every request, on the request's goroutine, once
	// its head has been read and before its body is; arrival is the stamp
	// (clock.Mono) taken then. It returns the exchange's Exchange, or nil
	// to let the exchange pass unwatched.
	//
	// A watched request's body is read whole (within
	// Config.MaxBodyBytes) before it is sent: Body sees it, and it can be
	// sent again when a kept-alive upstream connection turns out closed.
	// An unwatched body streams upstream as it arrives.
	//
	// Open is on every request's path: it decides at once and never
	// waits. It must not read r.Body; it may keep r until its Exchange's
	// End returns, not after.
	Open(r *http.Request, arrival int64) Exchange
}

// Exchange is told what happens to one watched exchange, in this order:
// Body (unless the body could not be read), Response (when a response
// head came), Read for each read of the response body, and End, always,
// last. The calls never overlap, and each happens after the one before
// (they may come on different goroutines: see each).
type Exchange interface {
	BodyTap
	ResponseTap
	ReadTap
	EndTap
}

// BodyTap is told the request's body.
type BodyTap interface {
	// Body is called on the request's goroutine once the request's body
	// has been read whole, right before the request is sent upstream.
	// body is not reused: it stays valid, unchanged, until End returns.
	// The request waits for Body: it must not wait on anything slow.
	Body(body []byte)
}

// ResponseTap is told the response's head.
type ResponseTap interface {
	// Response is called once the response's head has been read, before
	// its body: on the request's goroutine, or (the native stack on
	// Linux, a plain head) on the event loop's goroutine, which forwards
	// the responses of many exchanges. It must return at once: no
	// waiting, no I/O.
	Response(h Response)
}

// ReadTap is told each read of the response body.
type ReadTap interface {
	// Read is called for each read of the response body, after its bytes
	// were written to the client: p is the body's bytes that read brought
	// (an upstream's chunked framing removed; never empty) and stamp the
	// read's time (clock.Mono, taken right after it returned).
	//
	// p is the forwarding buffer, reused once Read returns: Read copies
	// what it keeps. Read runs on the goroutine that forwards the body:
	// the request's, or the event loop's (Response.Loop says it may be),
	// which every stream waits on: it must not block, and does as little
	// as it can. The reads of an encoded body (Content-Encoding other than
	// identity) always come on the request's goroutine, where Read may
	// wait briefly on work of its own (a decompressor's).
	Read(p []byte, stamp int64)
}

// EndTap is told how the exchange ended.
type EndTap interface {
	// End is called once, last, on the request's goroutine, after the
	// response's last byte went to the client (or the exchange failed)
	// and before the client connection's next request is read. It may
	// take its time: only that connection waits for it. Once it returns,
	// the stack no longer touches the Exchange, and the request and its
	// body are no longer the tap's to use.
	End(o Outcome)
}

// Response is what a tap is told of a response head.
type Response struct {
	Status int
	// Stamp is when the head was read (clock.Mono).
	Stamp int64
	// EventStream says its Content-Type is text/event-stream.
	EventStream bool
	// Encoding is its Content-Encoding as sent ("": none).
	Encoding string
	// Loop says the body may be read by the event loop that forwards
	// every stream on one goroutine: then Read keeps what it needs and
	// leaves parsing it for later, in bulk.
	Loop bool
}

// Outcome is how an exchange went at the HTTP level.
type Outcome struct {
	// SentNs is when the request was sent, DoneNs when the response's
	// last read (or the failure) came (clock.Mono; SentNs is 0 when the
	// request was never sent).
	SentNs, DoneNs int64
	// Status is the response's, 0 when no response head came.
	Status int
	// SendErr says why no response came: the upstream could not be
	// reached or sent no head, or the request was refused before it was
	// sent (a body too large or broken off; the client was answered by
	// the proxy then).
	SendErr error
	// ReadErr says why the response body broke off: the upstream cut it,
	// or the client went away before its end.
	ReadErr error
	// ClientGone says the client went away, or a write to it failed.
	ClientGone bool
	// Complete says the response body ended as its framing said.
	Complete bool
}
