package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every bad input to synth exits with code 2 and a message that names the
// file, line or flag and what was expected; no output file is left behind.
func TestSynthBadInputExits2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n"+`{"id":"b", "conversations": [}`+"\n"), 0o644)
	one := filepath.Join(dir, "one.jsonl")
	os.WriteFile(one, []byte(`{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n"), 0o644)
	out := filepath.Join(dir, "out.parquet")
	cases := []struct {
		args    []string
		mention []string
	}{
		{[]string{"--source", "sharegpt", "--input", filepath.Join(dir, "missing.json")}, []string{"missing.json", "no such file"}},
		{[]string{"--source", "sharegpt", "--input", bad}, []string{"bad.jsonl line 2", "malformed JSON"}},
		{[]string{"--source", "sharegpt", "--input", one, "--turns", "3-5"}, []string{"one.jsonl", "no conversation left"}},
		{[]string{"--turns", "5-3"}, []string{"--turns", "min 5 > max 3"}},
		{[]string{"--think-time", "weibull:k=1"}, []string{"--think-time", `unknown distribution "weibull"`}},
		{[]string{"--input-tokens", "abc"}, []string{"--input-tokens", "not a number"}},
		{[]string{"--source", "nosuch"}, []string{"nosuch"}},
	}
	for _, c := range cases {
		_, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
		if code != 2 {
			t.Errorf("synth %v: exit %d, want 2 (%s)", c.args, code, stderr)
		}
		for _, m := range c.mention {
			if !strings.Contains(stderr, m) {
				t.Errorf("synth %v: message %q does not mention %q", c.args, stderr, m)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("synth %v: left %s behind", c.args, out)
			os.Remove(out)
		}
	}
}

// Same seed and inputs give a byte-identical trace; inspect reads it back.
func TestSynthDeterministicAndInspectable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	// The same command twice (the command line is part of the metadata).
	p := filepath.Join(dir, "t0.parquet")
	var files [2][]byte
	for i := range files {
		if _, stderr, code := runCLI(t, "synth", "--conversations", "50", "--turns", "30-40", "--seed", "9", "-o", p); code != 0 {
			t.Fatalf("synth: %s", stderr)
		}
		files[i], _ = os.ReadFile(p)
	}
	if string(files[0]) != string(files[1]) {
		t.Fatal("the same seed gave different files")
	}
	out, stderr, code := runCLI(t, "inspect", filepath.Join(dir, "t0.parquet"))
	if code != 0 || !strings.Contains(out, "conversations       50") || !strings.Contains(out, "min 30") {
		t.Errorf("inspect exit %d:\n%s%s", code, out, stderr)
	}
}
