package jsonscan

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// The scanner's verdict on a document must be encoding/json's. Numbers
// are left out of the mutated documents: SkipNumber is lax on purpose
// (it accepts "1-2"), which the hot path never needs to reject.
func TestScanValidMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `{"a":"b"}`, `["x",true,false,null]`,
		`{"id":"chatcmpl-b","object":"chat.completion.chunk","choices":[{"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]}`,
		`{"a":{"b":{"c":["d",{"e":"f"},[]]}},"g":"h\"i\\j\/k\u00e9\ud83d\ude00","l":""}`,
		`{"tool_calls":[{"id":"t","function":{"name":"f","arguments":"{\"city\": \"Paris\"}"}}],"x":[[],[[]],{}]}`,
		`{"long":"` + strings.Repeat("abcdefgh", 9) + `\n` + strings.Repeat("ü", 11) + `"}`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	// Whitespace anywhere between tokens keeps a document valid.
	var spaced []string
	for _, d := range docs {
		for range 20 {
			spaced = append(spaced, sprinkleWS(r, d))
		}
	}
	docs = append(docs, spaced...)
	check := func(doc string) {
		t.Helper()
		got, want := Valid([]byte(doc)), json.Valid([]byte(doc))
		if got && !want && badEscape(doc) {
			return // SkipString does not check escapes (AppendString does)
		}
		if got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
		}
	}
	const alphabet = "{}[]\":,\\ \t\nabtrufnl/u\x00\x1f\x7f\xc3"
	for _, d := range docs {
		check(d)
		for range 200 { // one byte dropped, replaced or inserted
			b := []byte(d)
			k := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				b = append(b[:k:k], b[k+1:]...)
			case 1:
				b[k] = alphabet[r.IntN(len(alphabet))]
			case 2:
				b = append(b[:k:k], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[k:]...)...)
			}
			check(string(b))
		}
		for k := range len(d) { // every prefix is incomplete
			check(d[:k])
		}
	}
}

// badEscape reports whether doc has a backslash that starts no JSON escape.
func badEscape(doc string) bool {
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		if i+1 >= len(doc) {
			return true
		}
		switch doc[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+6 > len(doc) || strings.Trim(doc[i+2:i+6], "0123456789abcdefABCDEF") != "" {
				return true
			}
		default:
			return true
		}
		i++
	}
	return false
}

// sprinkleWS inserts random whitespace between the tokens of a compact
// document (outside strings).
func sprinkleWS(r *rand.Rand, d string) string {
	var b strings.Builder
	inStr, esc := false, false
	ws := func() {
		for range r.IntN(3) {
			b.WriteByte(" \t\r\n"[r.IntN(4)])
		}
	}
	ws()
	for i := 0; i < len(d); i++ {
		c := d[i]
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
			if !inStr {
				ws()
			}
		case !inStr && strings.IndexByte("{}[]:,el", c) >= 0:
			ws() // after structural bytes and the ends of true/false/null
		}
	}
	return b.String()
}

// SkipString and AppendString find a string's end and decode it as
// encoding/json does, for lengths and escape positions on either side of
// every word boundary (they test eight bytes at a time).
func TestScanStrings(t *testing.T) {
	pieces := []string{"a", "é", "€", "😀", `\"`, `\\`, `\/`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u0041`, `\u00e9`, `\ud83d\ude00`, " ", "~", "\x7f", "!", "#", "[", "]",
		"\u00a2", "\u00a0", "\u0710"} // ¢, nbsp, ܐ: bytes 0xa2, 0xa0, 0xdc are '"', ' ', '\\' with the high bit
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 2000 {
		var lit strings.Builder
		lit.WriteByte('"')
		for range r.IntN(1 + n%40) {
			if r.IntN(4) == 0 {
				lit.WriteString(pieces[r.IntN(len(pieces))])
			} else {
				lit.WriteByte(byte('a' + r.IntN(26)))
			}
		}
		lit.WriteByte('"')
		var want string
		if err := json.Unmarshal([]byte(lit.String()), &want); err != nil {
			t.Fatalf("test Literal %s: %v", lit.String(), err)
		}
		for _, tail := range []string{"", ",", `,"next":"value that is long enough"}`} {
			b := []byte(lit.String() + tail)
			if end := SkipString(b, 0); end != lit.Len() {
				t.Fatalf("SkipString(%q) = %d, want %d", b, end, lit.Len())
			}
			end, got := AppendString(b, 0, []byte("prefix"))
			if end != lit.Len() || string(got) != "prefix"+want {
				t.Fatalf("AppendString(%q) = %d %q, want %d %q", b, end, got, lit.Len(), "prefix"+want)
			}
		}
	}
	// Unterminated strings and raw control bytes are rejected wherever
	// they fall; AppendString, which decodes, also rejects a bad escape
	// (SkipString leaves escapes to whoever decodes the string).
	for n := range 40 {
		s := `"` + strings.Repeat("x", n)
		for _, bad := range []string{s, s + `\`, s + "\x00\"", s + "\n\"", s + "\x1f\"", s + `\q"`, s + `\u12"`} {
			if end := SkipString([]byte(bad), 0); end >= 0 && !strings.Contains(bad, `\`) {
				t.Fatalf("SkipString(%q) = %d, want -1", bad, end)
			}
			if end, _ := AppendString([]byte(bad), 0, nil); end >= 0 {
				t.Fatalf("AppendString(%q) = %d, want -1", bad, end)
			}
		}
	}
}

// ReadInt gives what the two-pass form it replaced gave (the end of the
// number as SkipNumber's old loop found it, the value of the leading
// digits), and SkipNumber ends numbers where that loop did, for numbers
// of every shape the lax grammar takes, null, and bytes that start none.
func TestReadInt(t *testing.T) {
	// SkipNumber as it was, a byte loop over the number's bytes.
	refSkip := func(b []byte, i int) int {
		start := i
		if b[i] == '-' {
			i++
		}
		digits := 0
		for i < len(b) {
			c := b[i]
			if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				if c >= '0' && c <= '9' {
					digits++
				}
				i++
				continue
			}
			break
		}
		if digits == 0 || i == start {
			return -1
		}
		return i
	}
	ref := func(b []byte, i int) (int, int64) {
		i = SkipWS(b, i)
		if i < len(b) && b[i] == 'n' {
			return Literal(b, i, "null"), -1
		}
		if i >= len(b) || !(b[i] == '-' || (b[i] >= '0' && b[i] <= '9')) {
			return -1, 0
		}
		end := refSkip(b, i)
		if end < 0 {
			return -1, 0
		}
		neg := b[i] == '-'
		if neg {
			i++
		}
		var v int64
		for ; i < end && b[i] >= '0' && b[i] <= '9'; i++ {
			if v < 1<<40 {
				v = v*10 + int64(b[i]-'0')
			}
		}
		if neg {
			v = -v
		}
		return end, v
	}
	nums := []string{"0", "7", "812", "-5", "-", "--1", "1.5", "1.5e3", "2E-2", "1e+9", "-0.0", "12-3", ".5", "e5", "99999999999999999999",
		"null", "nul", "x", "", " 42", "\t\n-3"}
	for _, n := range nums {
		for _, tail := range []string{"", ",", "}", " ,", "x", "9"} {
			b := []byte(n + tail)
			gotEnd, gotV := ReadInt(b, 0)
			wantEnd, wantV := ref(b, 0)
			if gotEnd != wantEnd || (gotEnd >= 0 && gotV != wantV) {
				t.Fatalf("ReadInt(%q) = %d %d, want %d %d", b, gotEnd, gotV, wantEnd, wantV)
			}
			if k := SkipWS(b, 0); k < len(b) && (b[k] == '-' || b[k]-'0' <= 9) {
				if got, want := SkipNumber(b, k), refSkip(b, k); got != want {
					t.Fatalf("SkipNumber(%q) = %d, want %d", b[k:], got, want)
				}
			}
		}
	}
}

// AppendQuoted writes what encoding/json writes for valid text, control
// bytes and invalid UTF-8 (U+FFFD), from a string or bytes alike, and
// allocates nothing once dst has room.
func TestAppendQuotedAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"plain", "q\"b\\s\n\r\t\x01\x1f", "é中😀", "bad \xff\xfe end", "cut \xe4\xb8", ""} {
		want, _ := json.Marshal(s)
		want = bytes.ReplaceAll(bytes.ReplaceAll(bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<")), []byte(`\u003e`), []byte(">")), []byte(`\u0026`), []byte("&"))
		if got := AppendQuoted(nil, s); string(got) != string(want) {
			t.Errorf("string %q: %s, want %s", s, got, want)
		}
		if got := AppendQuoted(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("bytes %q: %s, want %s", s, got, want)
		}
	}
	buf := make([]byte, 0, 256)
	b := []byte("bad \xff text é")
	if n := testing.AllocsPerRun(100, func() { buf = AppendQuoted(buf[:0], b) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
