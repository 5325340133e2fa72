package h1proxy

import "bytes"

// A response head as an evloop reads it (loop_linux.go): the loop parses
// the common case itself, so that the head and the first event go to the
// client from the read that brought them, without waking the request's
// goroutine. Anything else (informational or bodiless statuses, a
// compressed or close-delimited body, an HTTP/1.0 upstream, a Connection
// header naming other headers, obsolete line folding, a byte net/http may
// judge differently) is handed back to the goroutine, which parses it with
// net/http as before. So this parser only has to be right about what it
// accepts; head_test.go checks that net/http reads every head it accepts
// the same way.

// plainHead is what a plain response head says about its body.
type plainHead struct {
	status  int
	chunked bool  // Transfer-Encoding: chunked
	length  int64 // Content-Length (-1: chunked)
	close   bool  // Connection: close
	sse     bool  // Content-Type: text/event-stream...
}

// headStatus is what parsePlainHead found.
type headStatus uint8

const (
	headMore  headStatus = iota // no end of head yet
	headPlain                   // a plain head, parsed
	headOther                   // not one the loop forwards: net/http's to read
)

// maxLoopHead bounds the head the loop parses (longer ones are net/http's).
const maxLoopHead = 16 << 10

// parsePlainHead parses the head at the start of b. For a plain head it
// appends the client's status line and forwarded header lines (keys in
// canonical form, values trimmed) to out, and returns them with the
// head's length in b.
func parsePlainHead(b, out []byte) (h plainHead, o []byte, n int, st headStatus) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	head := b
	if end >= 0 {
		head = b[:end]
	}
	if end >= maxLoopHead || end < 0 && len(b) >= maxLoopHead {
		return h, out, 0, headOther
	}
	// A line that ends in a bare LF (which net/http accepts) may end the
	// head where this parser would wait for more.
	for i := bytes.IndexByte(head, '\n'); i >= 0; i = bytes.IndexByte(head, '\n') {
		if i == 0 || head[i-1] != '\r' {
			return h, out, 0, headOther
		}
		head = head[i+1:]
	}
	if end < 0 {
		return h, out, 0, headMore
	}
	n = end + 4
	line, rest, _ := bytes.Cut(b[:end+2], []byte("\r\n"))
	// "HTTP/1.1 200 OK": the version, a three-digit status, a reason.
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || len(line) > 12 && line[12] != ' ' {
		return h, out, n, headOther
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return h, out, n, headOther
		}
		h.status = h.status*10 + int(c-'0')
	}
	for _, c := range line[12:] {
		if c != '\t' && (c < ' ' || c == 0x7f) {
			return h, out, n, headOther
		}
	}
	if h.status < 200 || h.status == 204 || h.status == 304 || h.status > 599 {
		return h, out, n, headOther
	}
	h.length = -1
	haveCL := false
	o = appendStatusLine(out, h.status)
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return h, out, n, headOther // no name, or a folded line
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		for _, c := range name {
			if !tokenByte(c) {
				return h, out, n, headOther
			}
		}
		for _, c := range value {
			if c != '\t' && (c < ' ' || c == 0x7f) {
				return h, out, n, headOther
			}
		}
		switch {
		case equalFoldASCII(name, "Content-Length"):
			if haveCL || len(value) == 0 || len(value) > 18 {
				return h, out, n, headOther
			}
			haveCL, h.length = true, 0
			for _, c := range value {
				if c < '0' || c > '9' {
					return h, out, n, headOther
				}
				h.length = h.length*10 + int64(c-'0')
			}
			continue
		case equalFoldASCII(name, "Transfer-Encoding"):
			if h.chunked || !equalFoldASCII(value, "chunked") {
				return h, out, n, headOther
			}
			h.chunked = true
			continue
		case equalFoldASCII(name, "Connection"):
			for f := value; len(f) > 0; {
				var tok []byte
				tok, f, _ = bytes.Cut(f, []byte(","))
				tok = trimOWS(tok)
				switch {
				case equalFoldASCII(tok, "close"):
					h.close = true
				case len(tok) == 0, equalFoldASCII(tok, "keep-alive"):
				default:
					return h, out, n, headOther // it names headers not to forward
				}
			}
			continue
		case equalFoldASCII(name, "Content-Encoding"):
			if len(value) > 0 && !equalFoldASCII(value, "identity") {
				return h, out, n, headOther
			}
		case equalFoldASCII(name, "Content-Type"):
			h.sse = bytes.HasPrefix(value, []byte("text/event-stream"))
		case equalFoldASCII(name, "Trailer"), equalFoldASCII(name, "Upgrade"):
			return h, out, n, headOther
		}
		if hopByHop(name) {
			continue
		}
		k := len(o)
		o = append(o, name...)
		canonicalKey(o[k:])
		o = append(o, ':', ' ')
		o = append(o, value...)
		o = append(o, '\r', '\n')
	}
	if h.chunked == haveCL {
		return h, out, n, headOther // close-delimited, or both framings
	}
	if h.chunked {
		h.length = -1
	}
	return h, o, n, headPlain
}

// trimOWS trims the spaces and tabs around a header value.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// tokenByte reports whether c may be in a header name (RFC 9110's tchar).
func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// canonicalKey puts a header name (token bytes) in net/http's canonical
// form in place: upper case first and after each hyphen, lower case
// elsewhere.
func canonicalKey(k []byte) {
	upper := true
	for i, c := range k {
		switch {
		case upper && 'a' <= c && c <= 'z':
			k[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			k[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
}
