package capture

import (
	"net/http"
	"strings"
	"sync"

	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/internal/record"
)

// Open is the proxy's h1proxy.Tap: it watches every POST to an API's
// endpoint (apis.ByPath; its body is then read whole, for the API's
// request parser), and warns once per path about known LLM endpoints it
// cannot parse. Everything else passes unwatched.
func (p *Proxy) Open(r *http.Request, arrival int64) h1proxy.Exchange {
	if r.Method != http.MethodPost {
		return nil
	}
	spec, ok := apis.ByPath(r.URL.Path)
	if !ok || spec.ParseRequest == nil { // an API capture cannot read requests of
		p.warnUnparsed(r.URL.Path)
		return nil
	}
	p.enter()
	return &exchange{p: p, r: r, spec: spec, arrival: arrival}
}

var _ h1proxy.Tap = (*Proxy)(nil)

// fwdResult is how one exchange went at the HTTP level, and what the
// recorder made of its body.
type fwdResult struct {
	sentNs, headersNs, doneNs int64
	status                    int
	sendErr                   error // no response
	readErr                   error // the upstream body broke off
	clientGone                bool  // writing to the client failed, or it went away
	sse                       bool
	jsonBody                  []byte // a non-SSE body, bounded, for FeedJSON
	// undecoded names a Content-Encoding the proxy cannot decode (its
	// events are not parsed); decodeErr says why a compressed body could
	// not be decoded.
	undecoded string
	decodeErr error
}

// exchange is one LLM call the proxy watches (Proxy.Open), its
// h1proxy.Exchange: the request, its arrival and body, and, when it is
// recorded, its segment and the record.Stream its response is parsed into.
type exchange struct {
	p       *Proxy
	r       *http.Request
	spec    *apis.Spec // the API the request path is for
	arrival int64
	body    []byte
	seg     *segment // nil: forwarded, not recorded (a probe, or no segment)
	stream  *record.Stream
	rc      recorder
	res     fwdResult
}

var _ h1proxy.Exchange = (*exchange)(nil)

// Body takes the request's segment (its turn belongs to the segment current
// at its arrival) unless it is one of tracekit's probes (ProbeHeader).
func (x *exchange) Body(body []byte) {
	x.body = body
	p := x.p
	if x.r.Header.Get(ProbeHeader) != "" {
		return
	}
	seg, err := p.segmentFor(x.arrival)
	if err != nil {
		p.cfg.Logf("capture: %v (request forwarded, not recorded)", err)
		return
	}
	x.seg, x.stream = seg, p.streams.Get().(*record.Stream)
	if err := x.stream.SetAPI(x.spec.Name); err != nil { // resets it
		p.cfg.Logf("capture: %v (request forwarded, not recorded)", err)
		p.streams.Put(x.stream)
		x.seg, x.stream = nil, nil
		seg.inflight.Done()
		return
	}
	x.rc.stream = x.stream
}

// Response prepares the recorder for the body the head announces.
func (x *exchange) Response(h h1proxy.Response) {
	x.res.headersNs = h.Stamp
	x.rc.late = h.Loop
	x.rc.init(&x.res, h.EventStream, h.Encoding)
}

// Read records one read of the body.
func (x *exchange) Read(p []byte, stamp int64) { x.rc.feed(p, stamp) }

// End finishes parsing the body and accounts a recorded call. The request
// body is parsed here, after the response: nothing on the forwarding path
// waits for it, and the conversation is matched before the client can
// send its next turn on this connection.
func (x *exchange) End(o h1proxy.Outcome) {
	defer x.p.leave()
	x.rc.end(o.Complete && o.ReadErr == nil, o.DoneNs)
	if x.seg == nil {
		return
	}
	res := &x.res
	res.sentNs, res.doneNs, res.status = o.SentNs, o.DoneNs, o.Status
	res.sendErr, res.readErr, res.clientGone = o.SendErr, o.ReadErr, o.ClientGone
	x.p.account(x.seg, x, x.p.parseCall(x.spec, x.body), x.r)
}

// maxJSONBody bounds the non-streaming body kept for parsing.
const maxJSONBody = 16 << 20

// recorder is what an exchange does with each piece of body the proxy
// forwarded: parse it now (stamped by the read that brought it), or hand
// it to a decoder in lock step when the body is compressed.
type recorder struct {
	stream *record.Stream // nil: the body is not recorded
	res    *fwdResult
	dec    *decoder
	parse  bool
	// late (an event stream an evloop forwards): each piece is only
	// copied into pend as it is forwarded, and parsed with its own stamp
	// later, in bulk, when pend reaches pendMax or the body ends (on the
	// request's goroutine). The loop then forwards a burst of first
	// events without parsing between them.
	late bool
	pend *pending
}

// pending is the pieces of a body not parsed yet: their bytes, and where
// each ends with its read's stamp.
type pending struct {
	b     []byte
	marks []pendMark
}

type pendMark struct {
	end int
	t   int64
}

// pendMax bounds the bytes a recorder holds unparsed.
const pendMax = 4 << 10

var pendPool = sync.Pool{New: func() any { return &pending{b: make([]byte, 0, 2*pendMax)} }}

// init prepares rc for a response body (rc.stream set, nil when it is not
// recorded): sse says it is an event stream, enc is its Content-Encoding.
func (rc *recorder) init(res *fwdResult, sse bool, enc string) {
	rc.res, rc.parse = res, rc.stream != nil
	res.sse = sse
	if enc = strings.ToLower(strings.TrimSpace(enc)); rc.parse && enc != "" && enc != "identity" {
		if decodable(enc) {
			rc.dec = startDecoder(enc, rc.consume)
		} else {
			rc.parse, res.undecoded = false, enc
		}
	}
}

func (rc *recorder) consume(b []byte, t int64) {
	if rc.res.sse {
		rc.stream.Feed(b, t)
	} else if len(rc.res.jsonBody)+len(b) <= maxJSONBody {
		rc.res.jsonBody = append(rc.res.jsonBody, b...)
	}
}

// feed records one forwarded piece.
func (rc *recorder) feed(b []byte, t int64) {
	if !rc.parse || len(b) == 0 {
		return
	}
	switch {
	case rc.dec != nil:
		rc.dec.feed(b, t)
	case rc.late && rc.res.sse && (rc.pend != nil && len(rc.pend.b) > 0 || len(b) < pendMax):
		if rc.pend == nil {
			rc.pend = pendPool.Get().(*pending)
		}
		rc.pend.b = append(rc.pend.b, b...)
		rc.pend.marks = append(rc.pend.marks, pendMark{len(rc.pend.b), t})
		if len(rc.pend.b) >= pendMax {
			rc.flush()
		}
	default:
		rc.consume(b, t)
	}
}

// flush parses the pieces pend holds, in order, each with its own stamp.
func (rc *recorder) flush() {
	if rc.pend == nil {
		return
	}
	start := 0
	for _, m := range rc.pend.marks {
		rc.consume(rc.pend.b[start:m.end], m.t)
		start = m.end
	}
	rc.pend.b, rc.pend.marks = rc.pend.b[:0], rc.pend.marks[:0]
}

// end finishes recording: complete says the body ended as its framing
// said.
func (rc *recorder) end(complete bool, t int64) {
	rc.flush()
	if rc.pend != nil {
		if cap(rc.pend.b) <= 16*pendMax {
			pendPool.Put(rc.pend)
		}
		rc.pend = nil
	}
	if rc.dec != nil {
		rc.res.decodeErr = rc.dec.finish()
		rc.dec = nil
	}
	if rc.parse && complete && !rc.res.sse {
		rc.stream.FeedJSON(rc.res.jsonBody, t)
	}
}
