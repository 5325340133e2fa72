package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// What capture makes of how an exchange went: each row is a forwarding
// result and the upstream's body, and the kind and message recorded.
func TestSettle(t *testing.T) {
	const (
		event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w \"}}]}\n\n"
		done  = "data: [DONE]\n\n"
		bad   = "data: {not json\n\n"
	)
	cut := errors.New("connection reset by peer")
	for _, c := range []struct {
		name string
		res  fwdResult
		body string
		kind trace.ErrorKind
		msg  string
	}{
		{"a whole stream", fwdResult{status: 200}, event + done, "", ""},
		{"no [DONE]", fwdResult{status: 200}, event, trace.ErrStreamTruncated, "without data: [DONE]"},
		{"a bad event", fwdResult{status: 200}, bad + done, trace.ErrMalformed, "not a valid JSON object"},
		{"no upstream", fwdResult{sendErr: cut}, "", trace.ErrConnect, "upstream: connection reset"},
		{"the client gone before the upstream answered", fwdResult{sendErr: cut, clientGone: true}, "", trace.ErrCanceled, "before the upstream answered"},
		{"a status with an error event", fwdResult{status: 503, clientGone: true}, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n", trace.ErrHTTPStatus, "HTTP 503: "},
		{"an encoding capture does not decode, the client gone", fwdResult{status: 200, undecoded: "br", clientGone: true, readErr: cut}, "", trace.ErrMalformed, `"br"-encoded`},
		{"the upstream broke off", fwdResult{status: 200, readErr: cut}, event + bad, trace.ErrStreamTruncated, "broke off after 1 events"},
		{"the client went away", fwdResult{status: 200, clientGone: true, readErr: cut}, event, trace.ErrCanceled, "went away after 1 events"},
		{"the client went away after [DONE]", fwdResult{status: 200, clientGone: true, readErr: cut}, event + done, "", ""},
		{"a corrupt compressed body, arrived whole", fwdResult{status: 200, decodeErr: errors.New("flate: corrupt input")}, event + done, trace.ErrMalformed, "decoding the compressed body"},
		{"a corrupt compressed body, cut", fwdResult{status: 200, decodeErr: errors.New("unexpected EOF"), readErr: cut}, event, trace.ErrStreamTruncated, "broke off"},
	} {
		p := &Proxy{cfg: ProxyConfig{Logf: func(string, ...any) {}}}
		st := record.NewStream(nil)
		st.Feed([]byte(c.body), 1)
		var rec trace.Record
		st.Fill(&rec)
		p.settle(&rec, &c.res, st)
		if rec.ErrorKind != c.kind || !strings.Contains(rec.ErrorMessage, c.msg) || (c.msg == "") != (rec.ErrorMessage == "") {
			t.Errorf("%s: %q %q, want %q containing %q", c.name, rec.ErrorKind, rec.ErrorMessage, c.kind, c.msg)
		}
	}
}
