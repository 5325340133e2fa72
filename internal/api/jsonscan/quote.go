package jsonscan

// AppendQuoted appends s as a JSON string: quotes, backslashes and
// control bytes escaped, everything else (UTF-8 included) as it is. The
// encoders write every text they did not make themselves through it.
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
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
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
		start = i + 1
	}
	return append(dst, s[start:]...)
}
