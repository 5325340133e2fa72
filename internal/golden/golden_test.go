package golden

import "testing"

// A JSON-lines difference is named by the path of its first differing
// field, with both values there.
func TestFirstDiff(t *testing.T) {
	for _, c := range []struct {
		got, want, path, g, w string
	}{
		{`{"a":1,"b":"x"}`, `{"a":1,"b":"y"}`, "b", `"x"`, `"y"`},
		{`{"m":[{"r":"user","c":"hi"},{"r":"assistant","c":"yo"}]}`, `{"m":[{"r":"user","c":"hi"},{"r":"assistant","c":"no"}]}`, "m[1].c", `"yo"`, `"no"`},
		{`{"m":[1,2]}`, `{"m":[1,2,3]}`, "m[2]", "(absent)", "3"},
		{`{"a":1,"z":true}`, `{"a":1}`, "z", "true", "(absent)"},
		{`{"a":{"b":1}}`, `{"a":[1]}`, "a", `{"b":1}`, "[1]"},
		{`[1,2]`, `[1,3]`, "[1]", "2", "3"},
		{`3`, `4`, ".", "3", "4"},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, "text (equal as JSON)", `{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`not json`, `{}`, "line", "not json", "{}"},
	} {
		path, g, w := firstDiff(c.got, c.want)
		if path != c.path || g != c.g || w != c.w {
			t.Errorf("firstDiff(%s, %s) = %s: %s vs %s; want %s: %s vs %s", c.got, c.want, path, g, w, c.path, c.g, c.w)
		}
	}
}
