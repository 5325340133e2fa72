package api

import "strings"

// Redact returns a server's error message with what looks like a
// credential replaced by "<redacted>": the server's words go into
// recordings and logs, and some servers quote the key they refused
// ("Incorrect API key provided: sk-..."). It masks tokens that start with
// an API key prefix (sk-, sk-ant-, and the like) and what follows
// "Bearer ". A message without either is returned as it is.
func Redact(msg string) string {
	if !strings.Contains(msg, "sk-") && !strings.Contains(msg, "Bearer ") && !strings.Contains(msg, "bearer ") {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		switch {
		case hasPrefixFold(msg[i:], "bearer ") && keyByte(at(msg, i+7)):
			b.WriteString(msg[i : i+7])
			b.WriteString("<redacted>")
			i = skipKey(msg, i+7)
		case strings.HasPrefix(msg[i:], "sk-") && (i == 0 || !keyByte(msg[i-1])) && skipKey(msg, i)-i >= 12:
			b.WriteString("<redacted>")
			i = skipKey(msg, i)
		default:
			b.WriteByte(msg[i])
			i++
		}
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

func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
