package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestScrub(t *testing.T) {
	s := New("sk-live-0123456789", "")
	s.AddHeader("X-Api-Key", "xk-abcdef123456")
	s.AddHeader("Content-Type", "application/json") // not a credential
	s.AddHeaders(http.Header{"Authorization": {"Basic dXNlcjpodW50ZXIy"}})
	s.AddURL("https://user:hunter2pass@example.com/trace.parquet?X-Amz-Signature=abcdef0123456789")
	for _, c := range []struct{ in, want string }{
		{"HTTP 401: Incorrect API key provided: sk-live-0123456789.", "HTTP 401: Incorrect API key provided: <redacted>."},
		{"key xk-abcdef123456 revoked", "key <redacted> revoked"},
		{"got Basic dXNlcjpodW50ZXIy", "got <redacted>"},
		{"token dXNlcjpodW50ZXIy", "token <redacted>"},
		{"password hunter2pass, sig abcdef0123456789", "password <redacted>, sig <redacted>"},
		{"unknown key: Bearer some-other-token-42", "unknown key: Bearer <redacted>"},
		{`{"authorization": "Token abcd1234"}`, `{"authorization": "Token <redacted>"}`},
		{"the bearer of bad news", "the bearer of bad news"},
		{"Content-Type application/json is fine", "Content-Type application/json is fine"},
		{"", ""},
	} {
		if got := s.Scrub(c.in); got != c.want {
			t.Errorf("Scrub(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilS *Scrubber
	if got := nilS.Scrub("Bearer abcdefgh12345"); got != "Bearer <redacted>" {
		t.Errorf("nil scrubber: %q", got)
	}
}

func TestScrubErrorAndWriter(t *testing.T) {
	s := New("sk-live-0123456789")
	err := s.Error(fmt.Errorf("probe: %w: HTTP 401 sk-live-0123456789", fs.ErrPermission))
	if strings.Contains(err.Error(), "sk-live") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Error: %v (wraps ErrPermission: %v)", err, errors.Is(err, fs.ErrPermission))
	}
	var b bytes.Buffer
	w := s.Writer(&b)
	n, werr := fmt.Fprintf(w, "tracekit: %s\n", "sk-live-0123456789")
	if werr != nil || n != len("tracekit: sk-live-0123456789\n") || b.String() != "tracekit: <redacted>\n" {
		t.Errorf("Writer: %d %v %q", n, werr, b.String())
	}
}

// Values learned while others scrub (capture learns client keys as
// requests come): no race, nothing lost, and the set stays bounded.
func TestScrubberConcurrentAndBounded(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := fmt.Sprintf("key-%d-%06d", g, i)
				s.AddHeaders(http.Header{"Authorization": {"Bearer " + v}})
				if got := s.Scrub("x " + v); got != "x <redacted>" {
					t.Errorf("%q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	many := make([]string, maxValues+10)
	for i := range many {
		many[i] = fmt.Sprintf("many-%06d", i)
	}
	s.Add(many...)
	if n := len(*s.vals.Load()); n != maxValues || s.Scrub(many[len(many)-1]) != Redacted {
		t.Errorf("%d values kept, bound %d", n, maxValues)
	}
}

// Patterns masks credentials no Scrubber was told of, in the words servers
// use; what is not one stays.
func TestPatterns(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"out of KV cache", "out of KV cache"},
		{"Incorrect API key provided: sk-proj-abcdefghij1234567890. Find it at ...", "Incorrect API key provided: <redacted>. Find it at ..."},
		{"bad key sk-ant-api03-AAAAAAAAAAAA_bbbb-cc", "bad key <redacted>"},
		{"header was Bearer abc.def-ghi_jkl, refused", "header was Bearer <redacted>, refused"},
		{"authorization: bearer tok123", "authorization: bearer <redacted>"},
		{"task-sk-x is short: sk-short", "task-sk-x is short: sk-short"}, // not a key: inside a word, or too short
		{"Bearer ", "Bearer "},
	} {
		if got := Patterns(c.in); got != c.want {
			t.Errorf("Patterns(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
