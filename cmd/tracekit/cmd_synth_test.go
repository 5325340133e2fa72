package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// Every bad input to synth exits with code 2 and a message that names the
// file, line or flag and what was expected; no output file is left behind.
func TestSynthBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n"+`{"id":"b", "conversations": [}`+"\n"), 0o644)
	one := filepath.Join(dir, "one.jsonl")
	os.WriteFile(one, []byte(`{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n"), 0o644)
	out := filepath.Join(dir, "out.parquet")
	cases := []synthRefusal{
		{[]string{"--source", "sharegpt", "--input", filepath.Join(dir, "missing.json")}, []string{"missing.json", "no such file"}},
		{[]string{"--source", "sharegpt", "--input", bad}, []string{"bad.jsonl line 2", "malformed JSON"}},
		{[]string{"--source", "sharegpt", "--input", one, "--turns", "3-5"}, []string{"one.jsonl", "no conversation left"}},
		{[]string{"--turns", "5-3"}, []string{"--turns", "min 5 > max 3"}},
		{[]string{"--think-time", "weibull:k=1"}, []string{"--think-time", `unknown distribution "weibull"`}},
		{[]string{"--input-tokens", "abc"}, []string{"--input-tokens", "not a number"}},
		{[]string{"--source", "nosuch"}, []string{"nosuch"}},
	}
	checkSynthRefuses(t, out, cases)
}

// synthRefusal is a synth command line that must exit 2 with a message
// mentioning each of mention.
type synthRefusal struct {
	args    []string
	mention []string
}

// checkSynthRefuses runs each case with -o out: it must exit 2, say what
// it should and leave no output behind.
func checkSynthRefuses(t *testing.T, out string, cases []synthRefusal) {
	t.Helper()
	for _, c := range cases {
		_, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
		if code != ExitUsage {
			t.Errorf("synth %v: exit %d, want %d (%s)", c.args, code, ExitUsage, stderr)
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
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	// The same command twice (the command line is part of the metadata),
	// the second replacing the first's file.
	p := filepath.Join(dir, "t0.parquet")
	var files [2][]byte
	for i := range files {
		if _, stderr, code := runCLI(t, "synth", "--conversations", "50", "--turns", "30-40", "--seed", "9", "-o", p, "--force"); code != 0 {
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

// The import flags reach every production-trace source's options: the
// window, speed, clamp, limit, model, bad-row mode and block size shape
// the trace, and the report in the metadata says so.
func TestSynthImportFlags(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "w.jsonl")
	os.WriteFile(in, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}
{"timestamp": 1000, "input_length": 20, "output_length": 5, "hash_ids": [1]}
{"timestamp": 2000, "input_length": 30, "output_length": 5, "hash_ids": [2]}
{"timestamp": 2000, "input_length": 40, "output_length": 5, "hash_ids": [3, 4]}
{"timestamp": 3500, "input_length": 50, "output_length": 5, "hash_ids": [5, 6]}
not json
`), 0o644)
	out := filepath.Join(dir, "t.parquet")
	_, stderr, code := runCLI(t, "synth", "--source", "mooncake", "--input", in, "--start=1s", "--duration=2500ms", "--speed=2",
		"--max-input-tokens=35", "--limit=7", "--model=m1", "--skip-bad", "--block-size=32", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, meta, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	var at []int64
	var inTok []int32
	for _, r := range rows {
		at = append(at, r.ArrivalOffsetNs)
		inTok = append(inTok, r.InputTokens)
		if r.Model != "m1" {
			t.Errorf("row %s: model %q", r.ConversationID, r.Model)
		}
	}
	if !slices.Equal(at, []int64{0, 0.5e9, 0.5e9}) || !slices.Equal(inTok, []int32{20, 30, 35}) {
		t.Errorf("arrivals %v inputs %v", at, inTok)
	}
	for k, v := range map[string]string{"report.speed": "2", "report.limit": "7", "report.window_duration": "2.5s",
		"report.skip_bad": "true", "report.bad_rows": "1", "report.block_size": "32", "report.input": in, "speed": "2", "start": "1s"} {
		if meta.Options[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, meta.Options[k], v)
		}
	}
	// burstgpt's own flags reach its options.
	csv := filepath.Join(dir, "b.csv")
	os.WriteFile(csv, []byte("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"+
		"5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n118,GPT-4,417,217,634,API log\n"), 0o644)
	_, stderr, code = runCLI(t, "synth", "--source", "burstgpt", "--input", csv, "--filter-model", "chatgpt",
		"--log-type", "conversation", "--failed", "flag", "-o", out, "--force")
	if code != 0 {
		t.Fatalf("burstgpt: exit %d: %s", code, stderr)
	}
	rows, meta, err = trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].ConversationID != "burstgpt-l000000003-failed" || meta.Options["report.failed"] != "flag" ||
		meta.Options["report.filter_model"] != "chatgpt" {
		t.Errorf("rows %d (%v), options %v", len(rows), rows, meta.Options)
	}
}

// A flag out of range exits 2 with a message naming the flag, before any
// work: counts that must be at least 1, negative durations, a zero speed,
// and sizes whose trace could not be held in memory (refused from an
// estimate instead of crashing the runtime with out of memory).
func TestSynthOutOfRangeExits2(t *testing.T) {
	dir := t.TempDir()
	mc := filepath.Join(dir, "mc.jsonl")
	os.WriteFile(mc, []byte(`{"timestamp": 0, "input_length": 2000000000, "output_length": 5, "hash_ids": [0]}
{"timestamp": 5, "input_length": 2000000000, "output_length": 5, "hash_ids": [0]}
`), 0o644)
	sg := filepath.Join(dir, "sg.jsonl")
	os.WriteFile(sg, []byte(`{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n"), 0o644)
	// Line 4 is 25 s before line 3, and earlier than line 2, which the
	// 5 s window had already placed.
	late := filepath.Join(dir, "late.jsonl")
	os.WriteFile(late, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 5}
{"timestamp": 10000, "input_length": 10, "output_length": 5}
{"timestamp": 30000, "input_length": 10, "output_length": 5}
{"timestamp": 5000, "input_length": 10, "output_length": 5}
`), 0o644)
	checkSynthRefuses(t, filepath.Join(dir, "out.parquet"), []synthRefusal{
		{[]string{"--source", "mooncake", "--input", late, "--group-window", "5s"}, []string{"--group-window 5s", "late.jsonl line 4", "widen"}},
		{[]string{"--source", "mooncake", "--input", late, "--group-window", "-1s"}, []string{"--group-window -1s", "negative"}},
		{[]string{"--conversations", "0"}, []string{"--conversations 0", "at least 1"}},
		{[]string{"--conversations", "-3"}, []string{"--conversations -3"}},
		{[]string{"--turns", "0"}, []string{"--turns 0", "never reaches 1"}},
		{[]string{"--input-tokens", "0"}, []string{"--input-tokens 0", "never reaches 1"}},
		{[]string{"--output-tokens", "0-0"}, []string{"--output-tokens 0-0"}},
		{[]string{"--source", "sharegpt", "--input", sg, "--turns", "0"}, []string{"--turns", "nothing is in this range"}},
		{[]string{"--token-time", "-1ms"}, []string{"--token-time -1ms", "negative"}},
		{[]string{"--think-time", "-2s"}, []string{"--think-time", "negative"}},
		{[]string{"--rate", "-1"}, []string{"--rate -1"}},
		{[]string{"--burstiness", "0"}, []string{"--burstiness 0"}},
		{[]string{"--source", "mooncake", "--input", mc, "--start", "-1s"}, []string{"--start -1s", "negative"}},
		{[]string{"--source", "azure", "--input", mc, "--duration", "-5m"}, []string{"--duration -5m0s", "negative"}},
		{[]string{"--source", "bailian", "--input", mc, "--speed", "0"}, []string{"--speed 0"}},
		{[]string{"--source", "mooncake", "--input", mc, "--speed", "-2"}, []string{"--speed -2"}},
		{[]string{"--source", "mooncake", "--input", mc, "--max-input-tokens", "-1"}, []string{"--max-input-tokens -1"}},
		{[]string{"--source", "mooncake", "--input", mc, "--block-size", "-16"}, []string{"--block-size -16"}},
		{[]string{"--source", "burstgpt", "--input", mc, "--failed", "maybe"}, []string{"--failed maybe", "drop, keep or flag"}},
		{[]string{"--max-trace-size", "lots"}, []string{"--max-trace-size", "not a size"}},
		// Out of memory today: a count no trace can store, and one whose
		// text alone is terabytes.
		{[]string{"--input-tokens", "99999999999"}, []string{"--input-tokens 99999999999", "2147483647"}},
		{[]string{"--input-tokens", "1000000000"}, []string{"--max-trace-size 2GiB", "TiB of text", "--input-tokens"}},
		{[]string{"--conversations", "1000000000000"}, []string{"--max-trace-size 2GiB", "1000000000000 conversations"}},
		{[]string{"--source", "mooncake", "--input", mc, "--prompt-text"}, []string{"--max-trace-size 2GiB", "1 mooncake requests of 2000000000 prompt tokens so far"}},
	})
}

// --max-trace-size is the limit the estimate is held to: one long message
// is refused under a limit below its text and written under one above it.
func TestSynthMaxTraceSize(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.parquet")
	args := []string{"synth", "--conversations", "1", "--turns", "1", "--input-tokens", "100000", "--output-tokens", "1", "-o", out}
	_, stderr, code := runCLI(t, append(args, "--max-trace-size", "100KiB")...)
	if code != ExitUsage || !strings.Contains(stderr, "--max-trace-size 100KiB") {
		t.Fatalf("100,000 tokens under 100KiB: exit %d: %s", code, stderr)
	}
	if _, stderr, code = runCLI(t, append(args, "--max-trace-size", "2MB")...); code != 0 {
		t.Fatalf("100,000 tokens under 2MB: exit %d: %s", code, stderr)
	}
	rows, _, err := trace.ReadTurns(out)
	if err != nil || len(rows) != 1 || rows[0].InputTokens != 100000 {
		t.Fatalf("rows %d err %v", len(rows), err)
	}
}

// A synth whose input turns out bad part-way through leaves the existing
// trace byte for byte as it was, even with --force, and no temporary file
// beside it.
func TestSynthFailureKeepsExistingTrace(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "3", "--turns", "2", "-o", out); code != 0 {
		t.Fatalf("first synth: %s", stderr)
	}
	old, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var sg strings.Builder
	for i := range 500 {
		fmt.Fprintf(&sg, `{"id":"r%d","conversations":[{"from":"human","value":"question %d"},{"from":"gpt","value":"answer %d"}]}`+"\n", i, i, i)
	}
	sg.WriteString(`{"id":"bad", "conversations": [}` + "\n")
	bad := filepath.Join(t.TempDir(), "half.jsonl")
	os.WriteFile(bad, []byte(sg.String()), 0o644)
	mc := filepath.Join(t.TempDir(), "half.mooncake.jsonl")
	os.WriteFile(mc, []byte(strings.Repeat(`{"timestamp": 1, "input_length": 10, "output_length": 5}`+"\n", 300)+`{"timestamp": 2, "input_length": -4, "output_length": 5}`+"\n"), 0o644)
	for _, args := range [][]string{
		{"--source", "sharegpt", "--input", bad},
		{"--source", "mooncake", "--input", mc},
	} {
		_, stderr, code := runCLI(t, append(append([]string{"synth"}, args...), "-o", out, "--force")...)
		if code != ExitUsage || !strings.Contains(stderr, "line 501") && !strings.Contains(stderr, "line 301") {
			t.Errorf("synth %v: exit %d: %s", args, code, stderr)
		}
		if now, _ := os.ReadFile(out); !bytes.Equal(now, old) {
			t.Errorf("synth %v changed the existing trace", args)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("synth %v left files behind: %v", args, ents)
		}
	}
}

// synth never replaces an existing file without --force: the default
// trace.parquet and an -o of a streamed import are refused with exit 2
// naming the file and --force, left byte for byte as they were with
// nothing beside them; with --force the trace replaces them, and its
// metadata is the same as without (--force does not change the trace).
func TestSynthNeverReplacesWithoutForce(t *testing.T) {
	mooncake, err := filepath.Abs(filepath.Join("testdata", "synth", "mooncake.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	old := []byte("an earlier result, not a trace")
	for _, c := range []struct {
		out  string
		args []string
	}{
		{"trace.parquet", []string{"--conversations", "2", "--turns", "1", "--seed", "3"}},
		{"imported.parquet", []string{"--source", "mooncake", "--input", mooncake, "-o", "imported.parquet"}},
	} {
		if err := os.WriteFile(c.out, old, 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, append([]string{"synth"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.out+" exists") || !strings.Contains(stderr, "--force") || stdout != "" {
			t.Errorf("synth %v over an existing %s: exit %d, stdout %q, stderr %q; want exit 2 naming it and --force", c.args, c.out, code, stdout, stderr)
		}
		if now, err := os.ReadFile(c.out); err != nil || !bytes.Equal(now, old) {
			t.Errorf("synth %v without --force changed %s (%d bytes now, %d before): %v", c.args, c.out, len(now), len(old), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("synth %v left files behind: %v", c.args, ents)
		}

		stdout, stderr, code = runCLI(t, append([]string{"synth", "--force"}, c.args...)...)
		if code != 0 || !strings.Contains(stdout, "wrote "+c.out) {
			t.Fatalf("synth --force %v: exit %d: %s%s", c.args, code, stdout, stderr)
		}
		forced, meta, err := trace.ReadTurns(c.out)
		if err != nil || len(forced) == 0 {
			t.Fatalf("%s after --force: %d rows, %v", c.out, len(forced), err)
		}
		if strings.Contains(meta.Command, "force") || meta.Options["ignored"] != "" {
			t.Errorf("--force reached the metadata: command %q, ignored %q", meta.Command, meta.Options["ignored"])
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("synth --force %v left files behind: %v", c.args, ents)
		}
		if err := os.Remove(c.out); err != nil {
			t.Fatal(err)
		}
	}
}

// SIGINT while synth reads its input (a FIFO the test writes) exits 130
// and leaves the existing trace as it was, even with --force. The signal
// goes to this test process, so no test of this package may run in
// parallel with it.
func TestSynthInterruptKeepsExistingTrace(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "3", "--turns", "2", "-o", out); code != 0 {
		t.Fatalf("first synth: %s", stderr)
	}
	old, _ := os.ReadFile(out)
	fifo := filepath.Join(t.TempDir(), "in.jsonl")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := runCLI(t, "synth", "--source", "sharegpt", "--input", fifo, "-o", out, "--force")
		done <- result{stderr, code}
	}()
	// Opening for writing returns once synth has opened the FIFO, so its
	// signal handler is installed: the SIGINT goes to synth, not to the
	// test binary's default action.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := `{"id":"x","conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}` + "\n"
	if _, err := io.WriteString(w, line); err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(os.Getpid(), unix.SIGINT); err != nil {
		t.Fatal(err)
	}
	// Keep feeding records until synth stops reading (it checks for the
	// interrupt every 1024 records); the bound is a hang guard.
	for i := 0; i < 10_000_000; i++ {
		if _, err := io.WriteString(w, line); err != nil {
			break // EPIPE: synth closed its end
		}
	}
	w.Close()
	select {
	case r := <-done:
		if r.code != ExitInterrupted || !strings.Contains(r.stderr, "left as it was") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("synth did not stop after SIGINT")
	}
	if now, _ := os.ReadFile(out); !bytes.Equal(now, old) {
		t.Fatal("an interrupted synth changed the existing trace")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

// Bytes that are not UTF-8 in any input (a ShareGPT file, a JSONL or CSV
// import, a text file) are counted and reported like the other quirks:
// printed, and in the metadata's report.* keys; the trace's text stays
// valid UTF-8.
func TestSynthReportsInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sg := write("sg.jsonl", "{\"id\":\"a\",\"conversations\":[{\"from\":\"human\",\"value\":\"caf\xe9 \xff\xfe\"},{\"from\":\"gpt\",\"value\":\"ok\"}]}\n")
	mc := write("mc.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"note\": \"\xc3\"}\n")
	bg := write("bg.csv", "Session ID,Timestamp,Model,Request tokens,Response tokens,Log Type\ns\xff1,5,Chat\xe9GPT,47,18,Conversation log\n")
	var text strings.Builder
	for i := range 400 {
		fmt.Fprintf(&text, "The quiet river carried lantern number %d past the old bridge. ", i)
	}
	text.WriteString("A broken \xe2\x82 sequence and a stray \x80 byte end the story.\n")
	tf := write("text.txt", text.String())
	out := filepath.Join(dir, "t.parquet")
	for _, c := range []struct {
		args []string
		key  string
		want string
	}{
		{[]string{"--source", "sharegpt", "--input", sg}, "invalid_utf8_bytes", "3"},
		{[]string{"--source", "mooncake", "--input", mc}, "invalid_utf8_bytes", "1"},
		{[]string{"--source", "burstgpt", "--input", bg}, "invalid_utf8_bytes", "2"},
		{[]string{"--conversations", "2", "--text-file", tf}, "text_invalid_utf8_bytes", "3"},
		{[]string{"--source", "mooncake", "--input", mc, "--text-file", tf}, "text_invalid_utf8_bytes", "3"},
	} {
		stdout, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out, "--force")...)
		if code != 0 {
			t.Fatalf("synth %v: exit %d: %s", c.args, code, stderr)
		}
		if !regexp.MustCompile(`(?m)^\s+` + c.key + `\s+` + c.want + `$`).MatchString(stdout) {
			t.Errorf("synth %v: report does not say %s %s:\n%s", c.args, c.key, c.want, stdout)
		}
		rows, meta, err := trace.ReadTurns(out)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Options["report."+c.key] != c.want {
			t.Errorf("synth %v: metadata report.%s = %q, want %q", c.args, c.key, meta.Options["report."+c.key], c.want)
		}
		for _, r := range rows {
			for _, m := range r.Messages {
				if !utf8.ValidString(m.Content) || !utf8.ValidString(r.ConversationID) {
					t.Errorf("synth %v: row %q holds invalid UTF-8", c.args, r.ConversationID)
				}
			}
		}
	}
	// A clean input reports nothing of the kind.
	stdout, _, _ := runCLI(t, "synth", "--source", "mooncake", "--input", write("clean.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 5}`+"\n"), "-o", out)
	if strings.Contains(stdout, "utf8") {
		t.Errorf("clean input reports invalid UTF-8:\n%s", stdout)
	}
}

// The same seed and inputs give the same file whatever -o is called, and
// the metadata records the options the source used: --config's
// distributions, the default count, and the flags it ignored.
func TestSynthReproducibleAcrossOutputNames(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	cfg, err := filepath.Abs(filepath.Join("testdata", "synth", "multi_turn.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files [][]byte
	for _, out := range []string{filepath.Join(dir, "a.parquet"), filepath.Join(dir, "sub-dir b.parquet")} {
		args := []string{"synth", "--config", cfg, "--seed", "9", "--speed", "3", "--output", out}
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("two output names gave different files")
	}
	_, meta, err := trace.ReadTurns(filepath.Join(dir, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(meta.Command, "a.parquet") || !strings.Contains(meta.Command, "--seed=9") {
		t.Errorf("command %q: want the flags given without the output", meta.Command)
	}
	for k, v := range map[string]string{
		"turns":                "user turns of uniform(4..6)", // vLLM num_turns, converted to requests
		"common-prefix-tokens": "constant(20)",
		"output-tokens":        "uniform(5..15)",
		"conversations":        "4",
		"ignored":              "speed",
		"rate":                 "0",
	} {
		if meta.Options[k] != v {
			t.Errorf("options[%s] = %q, want %q (all: %v)", k, meta.Options[k], v, meta.Options)
		}
	}
	if _, ok := meta.Options["output"]; ok {
		t.Error("the output path is in the options")
	}
	if _, ok := meta.Options["start"]; ok {
		t.Error("an import flag the synthetic source does not read is recorded as used")
	}
}

// --config lays turn 0 out as vLLM's generator does: one user message
// whose common prefix counts inside num_tokens and whose conversation
// prefix comes on top; --prefix-layout system gives tracekit's system
// message on top of a full user message.
func TestSynthConfigTurn0Tokens(t *testing.T) {
	dir := t.TempDir()
	text, err := filepath.Abs(filepath.Join("testdata", "synth", "text.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"filetype": "generate_conversations", "num_conversations": 5, "text_files": [`+strconv.Quote(text)+`],
 "prompt_input": {"num_turns": {"distribution": "constant", "value": 4},
   "common_prefix_num_tokens": {"distribution": "constant", "value": 40},
   "prefix_num_tokens": {"distribution": "constant", "value": 30},
   "num_tokens": {"distribution": "constant", "value": 100}},
 "prompt_output": {"num_tokens": {"distribution": "constant", "value": 10}}}`), 0o644)
	tok, err := tokenizer.Open(tokenizer.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		layout      []string
		roles       string
		turn0, user int32 // turn 0's input tokens and its user message's
	}{
		{nil, "user", 130, 130}, // 40 common + marker + filler = 100, + 30 prefix
		{[]string{"--prefix-layout", "vllm"}, "user", 130, 130},
		{[]string{"--prefix-layout", "system"}, "system,user", 170, 100},
	} {
		out := filepath.Join(dir, "t.parquet")
		args := append([]string{"synth", "--config", cfg, "-o", out, "--force"}, c.layout...)
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.layout, code, stderr)
		}
		rows, meta, err := trace.ReadTurns(out)
		if err != nil {
			t.Fatal(err)
		}
		n0 := 0
		for _, r := range rows {
			if r.Turn != 0 {
				if r.InputTokens != 100 || len(r.Messages) != 1 {
					t.Errorf("%v: %s turn %d: %d input tokens in %d messages, want 100 in 1", c.layout, r.ConversationID, r.Turn, r.InputTokens, len(r.Messages))
				}
				continue
			}
			n0++
			var roles []string
			for _, m := range r.Messages {
				roles = append(roles, m.Role)
			}
			last := r.Messages[len(r.Messages)-1]
			if r.InputTokens != c.turn0 || strings.Join(roles, ",") != c.roles || last.Tokens != c.user {
				t.Errorf("%v: %s turn 0: %d input tokens, roles %v, user %d; want %d, %s, %d", c.layout, r.ConversationID,
					r.InputTokens, roles, last.Tokens, c.turn0, c.roles, c.user)
			}
			if got := tok.Count(last.Content); got != int(last.Tokens) {
				t.Errorf("%v: %s turn 0: the user message has %d tokens, recorded %d", c.layout, r.ConversationID, got, last.Tokens)
			}
		}
		if n0 != 5 {
			t.Errorf("%v: %d first turns, want 5", c.layout, n0)
		}
		if want := c.roles == "user"; (meta.Options["prefix-layout"] == "vllm") != want {
			t.Errorf("%v: prefix-layout recorded %q", c.layout, meta.Options["prefix-layout"])
		}
	}
	// an unknown layout names the flag
	if _, stderr, code := runCLI(t, "synth", "--config", cfg, "--prefix-layout", "side", "-o", filepath.Join(dir, "x.parquet")); code != 2 ||
		!strings.Contains(stderr, "--prefix-layout side") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
