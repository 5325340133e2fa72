// Package jsonscan is a tiny allocation-free JSON scanner for the handful
// of keys a response event carries. Every API decoder (internal/api/...)
// walks its events with it: encoding/json would allocate and reflect per
// event; these functions walk the bytes once, validate the structure as
// they go (so malformed events are detected), decode only the strings
// that are needed, and allocate nothing. Every function takes the input
// and a position and returns the position after what it consumed, or -1
// when the input is not valid JSON there.
//
// In: one event's bytes. Out: positions, integers, decoded strings
// appended to the caller's buffers, and calls to the caller's Field and
// Element functions for the members it asks about. AppendQuoted goes the
// other way, for the encoders: text to a JSON string.
package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 64

// SkipWS returns the position of the first byte at or after b[i] that
// is not JSON whitespace.
func SkipWS(b []byte, i int) int {
	// JSON whitespace is at most ' ': one compare settles compact JSON.
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue skips one JSON value starting at b[i] (whitespace allowed).
func SkipValue(b []byte, i, depth int) int {
	i = SkipWS(b, i)
	if i >= len(b) || depth > MaxDepth {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{':
		return WalkObject[none](b, i, depth+1, nil, nil)
	case c == '[':
		return WalkArray[none](b, i, depth+1, nil, nil)
	case c == 't':
		return Literal(b, i, "true")
	case c == 'f':
		return Literal(b, i, "false")
	case c == 'n':
		return Literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return SkipNumber(b, i)
	}
	return -1
}

// Literal consumes lit (true, false, null) at b[i].
func Literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// SkipNumber skips the number at b[i]. It is lax on purpose (it accepts
// "1-2"): the events it reads never need a bad number rejected.
func SkipNumber(b []byte, i int) int {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := 0
	for ; i < len(b); i++ {
		if c := b[i]; c-'0' <= 9 {
			digits++
		} else if !numberByte(c) {
			break
		}
	}
	if digits == 0 || i == start {
		return -1
	}
	return i
}

// numberByte reports whether c may follow a number's digits in it.
func numberByte(c byte) bool {
	return c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// SkipString skips the string starting at the quote b[i]. It rejects raw
// control bytes and leaves escapes unchecked (AppendString checks those it
// decodes).
func SkipString(b []byte, i int) int {
	for i++; ; {
		// plainRun's loops, here to save a call per string.
		for ; i+8 <= len(b); i += 8 {
			if m := stopBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
		}
		for ; i < len(b) && !isStop(b[i]); i++ {
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		default: // control byte
			return -1
		}
	}
}

// plainRun returns the position of the first quote, backslash or control
// byte at or after b[i], or len(b) if none (i itself when i >= len(b)).
// It tests eight bytes per step: for a word w and a byte value v, the
// bytes of w equal to v are the zero bytes of x = w^(v*ones), and
// (x-ones) &^ x & highs sets the high bit of the lowest zero byte (a
// borrow only ever flags bytes above it); (w-0x20*ones) &^ w & highs does
// the same for the lowest byte below 0x20. The lowest flag of the three
// is the first stop byte.
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := stopBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b) && !isStop(b[i]); i++ {
	}
	return i
}

// stopBytes flags the quotes, backslashes and control bytes of the eight
// bytes of w (little endian); see plainRun.
func stopBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := w^(ones*'"'), w^(ones*'\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs
}

func isStop(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }

// ReadInt parses an integer value (a float is truncated); null gives -1.
// It reads the digits as it scans them; only a number that goes on past
// them (fraction, exponent) or has none is handed to SkipNumber, from its
// start, for its end.
func ReadInt(b []byte, i int) (int, int64) {
	i = SkipWS(b, i)
	if i < len(b) && b[i] == 'n' {
		return Literal(b, i, "null"), -1
	}
	if i >= len(b) || !(b[i] == '-' || b[i]-'0' <= 9) {
		return -1, 0
	}
	start := i
	neg := b[i] == '-'
	if neg {
		i++
	}
	digits := i
	var v int64
	for ; i < len(b) && b[i]-'0' <= 9; i++ {
		if v < 1<<40 {
			v = v*10 + int64(b[i]-'0')
		}
	}
	if i == digits || (i < len(b) && numberByte(b[i])) {
		if i = SkipNumber(b, start); i < 0 {
			return -1, 0
		}
	}
	if neg {
		v = -v
	}
	return i, v
}

// AppendString decodes the string value at b[i] (or null, which appends
// nothing) onto dst.
func AppendString(b []byte, i int, dst []byte) (int, []byte) {
	i = SkipWS(b, i)
	if i < len(b) && b[i] == 'n' {
		return Literal(b, i, "null"), dst
	}
	if i >= len(b) || b[i] != '"' {
		return -1, dst
	}
	i++
	for i < len(b) {
		// Copy the run of plain bytes in one go.
		j := plainRun(b, i)
		dst = append(dst, b[i:j]...)
		i = j
		if i >= len(b) {
			return -1, dst
		}
		switch b[i] {
		case '"':
			return i + 1, dst
		case '\\':
			if i+1 >= len(b) {
				return -1, dst
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, n := decodeU(b, i)
				if n < 0 {
					return -1, dst
				}
				dst = utf8.AppendRune(dst, r)
				i += n
				continue
			default:
				return -1, dst
			}
			i += 2
		default: // control character
			return -1, dst
		}
	}
	return -1, dst
}

// decodeU decodes \uXXXX (and a following low surrogate) at b[i]; it
// returns the rune and the bytes consumed.
func decodeU(b []byte, i int) (rune, int) {
	r1, ok := hex4(b, i+2)
	if !ok {
		return 0, -1
	}
	if utf16.IsSurrogate(r1) {
		if r2, ok := hex4(b, i+8); ok && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// none is the state type of a walk that only skips.
type none struct{}

// Field is called for each member of an object with the raw key bytes
// (not unescaped; the keys the decoders need have no escapes) and the
// position of the value; it returns the position after the value, or -1.
// c is the caller's walk state. Plain functions (not closures) keep the
// walk allocation-free.
type Field[T any] func(c *T, key []byte, b []byte, i, depth int) int

// WalkObject walks the object at b[i], calling f for each member (or
// skipping every value when f is nil). depth is the object's nesting.
func WalkObject[T any](b []byte, i, depth int, c *T, f Field[T]) int {
	if depth > MaxDepth || i >= len(b) || b[i] != '{' {
		return -1
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		end := SkipString(b, i)
		if end < 0 {
			return -1
		}
		key := b[i+1 : end-1]
		i = SkipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		if f != nil {
			i = f(c, key, b, i+1, depth)
		} else {
			i = SkipValue(b, i+1, depth)
		}
		// What follows the member, inline: this runs after every member
		// of every event (a helper here costs a call, too big to inline).
		if i < 0 {
			return -1
		}
		if i = SkipWS(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// Element is called for each element of an array at position i.
type Element[T any] func(c *T, b []byte, i, depth int) int

// WalkArray walks the array at b[i], calling f for each element (or
// skipping them when f is nil).
func WalkArray[T any](b []byte, i, depth int, c *T, f Element[T]) int {
	if depth > MaxDepth || i >= len(b) || b[i] != '[' {
		return -1
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		if f != nil {
			i = f(c, b, i, depth)
		} else {
			i = SkipValue(b, i, depth)
		}
		if i < 0 {
			return -1
		}
		if i = SkipWS(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// Valid reports whether b is one JSON value, whitespace around it
// allowed.
func Valid(b []byte) bool {
	i := SkipValue(b, 0, 0)
	return i >= 0 && SkipWS(b, i) == len(b)
}

// Object reports whether b is one JSON object (whitespace around it
// allowed), the only shape an event's data may have.
func Object(b []byte) bool {
	i := SkipWS(b, 0)
	return i < len(b) && b[i] == '{' && Valid(b)
}

// String returns the value of the string at b[i] without its quotes,
// undecoded (escapes left as they are): for comparing a "type" value
// with a name that has no escapes. ok is false when b[i] is no string.
func String(b []byte, i, depth int) (end int, raw []byte, ok bool) {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return SkipValue(b, i, depth), nil, false
	}
	end = SkipString(b, i)
	if end < 0 {
		return -1, nil, false
	}
	return end, b[i+1 : end-1], true
}

// Span returns the position after the value at b[i] and the value's
// bytes, for a member whose meaning depends on one read later (the
// "type" that some servers put last).
func Span(b []byte, i, depth int) (end int, v []byte) {
	i = SkipWS(b, i)
	end = SkipValue(b, i, depth)
	if end < 0 {
		return -1, nil
	}
	return end, b[i:end]
}
