package jsonpos

import (
	"encoding/json"
	"strings"
	"testing"
)

// A syntax error is placed at its offending byte, a type error just past
// its value with its field, and the end of the input is said as such.
func TestLocate(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	in := []byte("{\n  \"a\": 1,\n  x\n}")
	f := Locate(json.Unmarshal(in, &v))
	if l, c := LineCol(in, f.Off); l != 3 || c != 3 || f.Relative || f.At(in) != "line 3, column 3" {
		t.Errorf("syntax error at line %d column %d (%+v)", l, c, f)
	}
	in = []byte(`{"a": "one"}`)
	f = Locate(json.Unmarshal(in, &v))
	if f.Field != "a" || !f.Relative || f.Off != 11 || !strings.Contains(f.Err.Error(), "want int, found JSON string") {
		t.Errorf("type error %+v: %v", f, f.Err)
	}
	f = Locate(json.NewDecoder(strings.NewReader(`{"a": 1`)).Decode(&v)) // a decoder meets the end
	if f.Off != -1 || f.At(nil) != "" || !strings.Contains(f.Err.Error(), "unexpected end") {
		t.Errorf("truncated input %+v", f)
	}
	if l, c := LineCol([]byte("ab\ncd"), 99); l != 2 || c != 3 {
		t.Errorf("an offset past the end is clamped: line %d column %d", l, c)
	}
}
