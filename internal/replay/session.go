package replay

import (
	"bytes"
	"strconv"

	"github.com/tracekit/tracekit/internal/api/jsonscan"
	"github.com/tracekit/tracekit/trace"
	"github.com/valyala/fasthttp"
)

// SessionFieldUser is Config.SessionField's one value: the key goes in the
// body's "user" field (Messages: metadata.user_id), which OpenAI's APIs
// define as the end user's id and routers can hash.
const SessionFieldUser = "user"

// checkSession checks the session options.
func (c *Config) checkSession() error {
	if c.SessionField != "" && c.SessionField != SessionFieldUser {
		return fieldErr("SessionField", "%q: want %q (the body's user field)", c.SessionField, SessionFieldUser)
	}
	if h := c.SessionHeader; h != "" {
		for i := 0; i < len(h); i++ {
			if !isTokenChar(h[i]) {
				return fieldErr("SessionHeader", "%q: not a header name (byte %d)", h, i)
			}
		}
	}
	if c.SessionPerAgent && c.SessionHeader == "" && c.SessionField == "" {
		return fieldErr("SessionPerAgent", "keys nothing without a session header or field")
	}
	return nil
}

// isTokenChar reports whether b may appear in an HTTP header name (RFC
// 9110 token).
func isTokenChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), b) >= 0
}

// appendSessionKey appends the session key of a request of conversation
// conv whose agent context started at turn agent: the conversation id,
// the same for every turn of it (sub-agents included), or with perAgent
// the id and "/agent-N" for a context other than the conversation's first
// (N the turn that started it).
func appendSessionKey(dst []byte, conv string, agent int32, perAgent bool) []byte {
	dst = append(dst, conv...)
	if perAgent && agent > 0 {
		dst = append(dst, "/agent-"...)
		dst = strconv.AppendInt(dst, int64(agent), 10)
	}
	return dst
}

// setSession sets the request's session key in the header and the body
// the run sends it in, and returns the body to send: body itself, or a
// copy in ex's buffer with the key's field before its closing brace
// (after --extra-body's fields, which may not set it).
func (r *runState) setSession(req *fasthttp.Request, ex *exchange, turn *trace.Turn, body []byte, ep Endpoint) []byte {
	ex.session = appendSessionKey(ex.session[:0], turn.ConversationID, ex.agent, r.cfg.SessionPerAgent)
	if r.cfg.SessionHeader != "" {
		req.Header.SetBytesV(r.cfg.SessionHeader, ex.session)
	}
	end := bytes.LastIndexByte(body, '}')
	if r.cfg.SessionField == "" || end < 0 || speech(ep) { // a form has no JSON to add the field to
		return body
	}
	b := append(ex.withSession[:0], body[:end]...)
	if ep == EndpointMessages {
		b = append(b, `,"metadata":{"user_id":`...)
		b = jsonscan.AppendQuoted(b, ex.session)
		b = append(b, '}')
	} else {
		b = append(b, `,"user":`...)
		b = jsonscan.AppendQuoted(b, ex.session)
	}
	b = append(b, body[end:]...)
	ex.withSession = b
	return b
}
