package jsonscan

import "unicode/utf8"

// AppendQuoted appends s as a JSON string: quotes, backslashes and
// control bytes escaped, invalid UTF-8 as U+FFFD (as encoding/json writes
// it: a server's JSON parser may refuse it otherwise), everything else as
// it is. Request and mock encoders write every text they did not make
// themselves through it.
func AppendQuoted[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends the inside of AppendQuoted's string: for text
// that goes into a string the caller opened.
func AppendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		// Decode from a copy of at most 4 bytes: no conversion of s to
		// either type, so nothing is allocated.
		var r [utf8.UTFMax]byte
		n := copy(r[:], s[i:min(i+utf8.UTFMax, len(s))])
		if ch, size := utf8.DecodeRune(r[:n]); ch == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		} else {
			i += size
		}
	}
	return append(dst, s[start:]...)
}
