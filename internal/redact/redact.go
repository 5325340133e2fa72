package redact

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted replaces a secret in a message.
const Redacted = "<redacted>"

// minLen is the shortest value scrubbed: a shorter one is no credential
// worth the name, and replacing it everywhere would garble messages.
const minLen = 6

// maxValues bounds the values a Scrubber keeps (capture learns one per
// client key); beyond it the oldest are forgotten (the Bearer pattern
// still catches them in an Authorization-like context).
const maxValues = 4096

// Tokens in an Authorization-like context, whoever sent them: a Bearer
// token anywhere (the scheme is only ever used for credentials), and the
// value of a quoted Authorization header ("Authorization: Basic ...").
var (
	bearerToken = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/-]{8,}=*`)
	authValue   = regexp.MustCompile(`(?i)\b(authorization["']?\s*[:=]\s*["']?(?:[A-Za-z]+\s+)?)[A-Za-z0-9._~+/-]{4,}=*`)
)

// Header reports whether a header may carry a credential (Authorization,
// x-api-key, api-key, tokens, cookies...). It allocates nothing: capture
// asks it of every request header.
func Header(name string) bool {
	for _, s := range [...]string{"authorization", "key", "token", "secret", "cookie", "password"} {
		if containsFold(name, s) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII sub,
// ignoring ASCII case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// Scrubber replaces known secret values in messages. The zero value is
// ready; a nil *Scrubber scrubs only the Bearer/Basic pattern. It is safe
// for concurrent use: adding is rare and copies, scrubbing reads a
// snapshot without a lock.
type Scrubber struct {
	mu   sync.Mutex
	seen map[string]bool
	vals atomic.Pointer[[]string] // longest first, so a value containing another goes whole
}

// New returns a Scrubber knowing values.
func New(values ...string) *Scrubber {
	s := &Scrubber{}
	s.Add(values...)
	return s
}

// Add makes the scrubber replace each value; for a value "Scheme token"
// (an Authorization header's) the token alone too. Empty and very short
// values are ignored.
func (s *Scrubber) Add(values ...string) {
	var add []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		add = append(add, v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			add = append(add, strings.TrimSpace(tok))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	var cur []string
	if p := s.vals.Load(); p != nil {
		cur = *p
	}
	next := cur
	for _, v := range add {
		if len(v) < minLen || s.seen[v] {
			continue
		}
		if len(next) == len(cur) {
			next = slices.Clone(cur)
		}
		s.seen[v] = true
		next = append(next, v)
	}
	if len(next) == len(cur) {
		return
	}
	if len(next) > maxValues {
		for _, v := range next[:len(next)-maxValues] {
			delete(s.seen, v)
		}
		next = next[len(next)-maxValues:]
	}
	slices.SortStableFunc(next, func(a, b string) int { return len(b) - len(a) })
	s.vals.Store(&next)
}

// AddHeader adds a header's value when its name says it may carry a
// credential.
func (s *Scrubber) AddHeader(name, value string) {
	if Header(name) {
		s.Add(value)
	}
}

// AddHeaders adds the values of h's credential-like headers. It looks up
// no more than it must: capture calls it for every request.
func (s *Scrubber) AddHeaders(h http.Header) {
	for name, vs := range h {
		if Header(name) {
			for _, v := range vs {
				if !s.known(v) {
					s.Add(v)
				}
			}
		}
	}
}

// known reports whether v was added already.
func (s *Scrubber) known(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[strings.TrimSpace(v)]
}

// AddURL adds the credentials a URL carries: its userinfo (password, and
// user:password) and its query values (a presigned URL's signature).
func (s *Scrubber) AddURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			s.Add(p, u.User.Username()+":"+p)
		} else {
			s.Add(u.User.Username())
		}
	}
	for _, vs := range u.Query() {
		s.Add(vs...)
	}
}

// Scrub returns msg with every known secret and every Bearer/Basic token
// replaced by Redacted. A message without any is returned as it is.
func (s *Scrubber) Scrub(msg string) string {
	if msg == "" {
		return msg
	}
	if s != nil {
		if p := s.vals.Load(); p != nil {
			for _, v := range *p {
				if strings.Contains(msg, v) {
					msg = strings.ReplaceAll(msg, v, Redacted)
				}
			}
		}
	}
	return Patterns(msg)
}

// Patterns returns msg with what looks like a credential, whoever it
// belongs to, replaced by Redacted: a Bearer token, the value of a quoted
// Authorization header, and a token with an API key prefix (sk-, sk-ant-,
// sk-proj- ...), which servers quote when they refuse a key ("Incorrect
// API key provided: sk-..."). It is what a Scrubber that knows no value
// does; the stream parser applies it to a server's in-stream error words.
func Patterns(msg string) string {
	for _, re := range [...]*regexp.Regexp{bearerToken, authValue} {
		if re.MatchString(msg) {
			msg = re.ReplaceAllString(msg, "${1}"+Redacted)
		}
	}
	return keyTokens(msg)
}

// keyTokens masks every token that starts with "sk-" at a word's start and
// is at least 12 bytes long.
func keyTokens(msg string) string {
	if !strings.Contains(msg, "sk-") {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if strings.HasPrefix(msg[i:], "sk-") && (i == 0 || !keyByte(msg[i-1])) && skipKey(msg, i)-i >= 12 {
			b.WriteString(Redacted)
			i = skipKey(msg, i)
			continue
		}
		b.WriteByte(msg[i])
		i++
	}
	return b.String()
}

// keyByte reports whether c may be part of a key or token.
func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '*'
}

// skipKey returns the end of the key at s[i]; a '.' ending it is the
// sentence's, not the key's.
func skipKey(s string, i int) int {
	start := i
	for i < len(s) && keyByte(s[i]) {
		i++
	}
	for i > start && s[i-1] == '.' {
		i--
	}
	return i
}

// Error returns err with its message scrubbed; errors.Is and errors.As
// still see what it wraps. nil stays nil.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.Scrub(msg); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Writer returns a writer that scrubs what it is given before passing it
// to w. Each Write is scrubbed on its own: tracekit writes a message in
// one call (fmt.Fprintf), so a secret is never split across two.
func (s *Scrubber) Writer(w io.Writer) io.Writer { return &writer{s: s, w: w} }

// Unwrap returns the writer a Writer passes to (to ask whether it is a
// terminal), or w itself.
func Unwrap(w io.Writer) io.Writer {
	if sw, ok := w.(*writer); ok {
		return sw.w
	}
	return w
}

type writer struct {
	s *Scrubber
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	clean := w.s.Scrub(string(p))
	if len(clean) == len(p) && clean == string(p) {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, clean); err != nil {
		return 0, err
	}
	return len(p), nil
}

type ctxKey struct{}

// NewContext returns ctx carrying s, for a command to find the scrubber of
// its run.
func NewContext(ctx context.Context, s *Scrubber) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the Scrubber ctx carries, or a new one (which then
// scrubs only what its holder gives it).
func FromContext(ctx context.Context) *Scrubber {
	if ctx != nil {
		if s, ok := ctx.Value(ctxKey{}).(*Scrubber); ok && s != nil {
			return s
		}
	}
	return New()
}
