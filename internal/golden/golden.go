// Package golden compares test output with a file of testdata: Check byte
// for byte, CheckJSONL value by value. What flows in is the output and the
// file's name, what flows out is a test failure naming the first differing
// line (for JSON lines also the field and both values) or, with the test
// binary's -update flag, the file rewritten. It is for tests only.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check compares got with testdata/name.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	want := read(t, name, got)
	if bytes.Equal(got, want) {
		return
	}
	path := filepath.Join("testdata", name)
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		g, w := at(gl, i), at(wl, i)
		if g != w {
			t.Fatalf("%s differs at line %d:\ngot  %q\nwant %q", path, i+1, g, w)
		}
	}
	t.Fatalf("%s differs", path) // only in line endings beyond the split
}

// Line is one line of a JSON-lines golden file: Value encoded as JSON,
// Name what it is, for failure messages ("row 3").
type Line struct {
	Name  string
	Value any
}

// maxDiffs bounds the differing lines one CheckJSONL reports.
const maxDiffs = 10

// CheckJSONL compares lines, each Value encoded as one line of JSON (HTML
// characters unescaped, so text reads as it is), with testdata/name. A
// differing line is reported by its number, its Name, the path of the
// first field that differs (messages[1].content) and both values there;
// up to maxDiffs lines are reported, then the line counts.
func CheckJSONL(t testing.TB, name string, lines []Line) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // one value per line, newline-terminated
	enc.SetEscapeHTML(false)
	got := make([]string, len(lines))
	for i, l := range lines {
		b.Reset()
		if err := enc.Encode(l.Value); err != nil {
			t.Fatalf("%s: encoding %s: %v", name, l.Name, err)
		}
		got[i] = strings.TrimSuffix(b.String(), "\n")
	}
	data := []byte(strings.Join(got, "\n") + "\n")
	want := read(t, name, data)
	if bytes.Equal(data, want) {
		return
	}
	path := filepath.Join("testdata", name)
	wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	diffs := 0
	for i := range min(len(got), len(wl)) {
		if got[i] == wl[i] {
			continue
		}
		field, g, w := firstDiff(got[i], wl[i])
		t.Errorf("%s line %d (%s): %s: got %s, want %s", path, i+1, lines[i].Name, field, g, w)
		if diffs++; diffs == maxDiffs {
			break
		}
	}
	if n := min(len(got), len(wl)); len(got) != len(wl) {
		side, first := "got", at(got, n)
		if len(wl) > n {
			side, first = "want", wl[n]
		}
		t.Errorf("%s: got %d lines, want %d; the first extra one (%s): %s", path, len(got), len(wl), side, clip(first))
	}
	if diffs == 0 && len(got) == len(wl) {
		t.Errorf("%s differs", path) // only in line endings
	}
}

// read returns the golden file testdata/name, first rewriting it with got
// under -update.
func read(t testing.TB, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	return want
}

// firstDiff is the path of the first place two JSON texts differ, and the
// (clipped) JSON of each value there; "line" when either is not JSON.
func firstDiff(got, want string) (path, g, w string) {
	var gv, wv any
	if json.Unmarshal([]byte(got), &gv) != nil || json.Unmarshal([]byte(want), &wv) != nil {
		return "line", clip(got), clip(want)
	}
	if path, gv, wv = diffValue("", gv, wv); path == "" {
		return "text (equal as JSON)", clip(got), clip(want)
	}
	return path, show(gv), show(wv)
}

// absent stands for a field or element one side lacks.
type absent struct{}

// diffValue walks a and b (decoded JSON) in order and returns the path of
// the first difference with the two values there; "" and nils when equal.
func diffValue(path string, a, b any) (string, any, any) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			x, xok := av[k]
			y, yok := bv[k]
			sub := strings.TrimPrefix(path+"."+k, ".")
			switch {
			case !xok:
				return sub, absent{}, y
			case !yok:
				return sub, x, absent{}
			}
			if p, x, y := diffValue(sub, x, y); p != "" {
				return p, x, y
			}
		}
		return "", nil, nil
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(av), len(bv)) {
			sub := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(av):
				return sub, absent{}, bv[i]
			case i >= len(bv):
				return sub, av[i], absent{}
			}
			if p, x, y := diffValue(sub, av[i], bv[i]); p != "" {
				return p, x, y
			}
		}
		return "", nil, nil
	default:
		if a == b {
			return "", nil, nil
		}
	}
	if path == "" {
		path = "."
	}
	return path, a, b
}

// show is v as JSON, clipped; "(absent)" for a missing field.
func show(v any) string {
	if _, ok := v.(absent); ok {
		return "(absent)"
	}
	b, _ := json.Marshal(v)
	return clip(string(b))
}

// clip shortens s for a message.
func clip(s string) string {
	const n = 300
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d bytes)", len(s))
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}
