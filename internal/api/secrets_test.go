package api

import "testing"

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"out of KV cache", "out of KV cache"},
		{"Incorrect API key provided: sk-proj-abcdefghij1234567890. Find it at ...", "Incorrect API key provided: <redacted>. Find it at ..."},
		{"bad key sk-ant-api03-AAAAAAAAAAAA_bbbb-cc", "bad key <redacted>"},
		{"header was Bearer abc.def-ghi_jkl, refused", "header was Bearer <redacted>, refused"},
		{"authorization: bearer tok123", "authorization: bearer <redacted>"},
		{"task-sk-x is short: sk-short", "task-sk-x is short: sk-short"}, // not a key: inside a word, or too short
		{"Bearer ", "Bearer "},
	}
	for _, c := range cases {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
