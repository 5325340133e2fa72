package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// quirky holds one record per quirk of real ShareGPT files.
const quirky = `[
 {"id": "plain", "conversations": [
   {"from": "human", "value": "Hello there, how are you?"},
   {"from": "gpt", "value": "I am fine, thank you for asking."},
   {"from": "human", "value": "Tell me a story."},
   {"from": "gpt", "value": "Once upon a time there was a tracer."}]},
 {"id": "leading", "conversations": [
   {"from": "gpt", "value": "Certainly! Here is more."},
   {"from": "human", "value": "Go on."},
   {"from": "chatgpt", "value": "And so it went."}]},
 {"id": "system", "conversations": [
   {"from": "system", "value": "You are terse."},
   {"from": "user", "value": "Why?"},
   {"from": "assistant", "value": "Because."},
   {"from": "system", "value": "A late system note."},
   {"from": "user", "value": "Ok."},
   {"from": "bard", "value": "Fine."}]},
 {"id": "merge", "conversations": [
   {"from": "human", "value": "Part one."},
   {"from": "human", "value": "Part two."},
   {"from": "bing", "value": "Answer A."},
   {"from": "gpt", "value": "Answer B."}]},
 {"id": "empty", "conversations": [
   {"from": "human", "value": "   "},
   {"from": "human", "value": "Real question?"},
   {"from": "gpt", "value": ""},
   {"from": "gpt", "value": "Real answer."},
   {"from": "human", "value": "Dangling question with no answer"}]},
 {"id": "weird", "conversations": [
   {"from": "narrator", "value": "Meanwhile..."},
   {"from": "human", "value": "Hi"},
   {"from": "gpt", "value": "Hello"}]},
 {"id": "nothing", "conversations": [{"from": "gpt", "value": "Only an answer."}]},
 {"id": "plain", "conversations": [
   {"from": "human", "value": "Same id again"},
   {"from": "gpt", "value": "Still kept"}]},
 {"conversations": []},
 {"id": 42, "messages": [
   {"role": "user", "content": "OpenAI style?"},
   {"role": "assistant", "content": "Yes, read too."}]}
]`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShareGPTQuirks(t *testing.T) {
	tok := tokenizer.Default()
	// the same records as JSON Lines must read identically
	var lines []string
	for _, rec := range splitTopLevel(t, quirky) {
		lines = append(lines, strings.Join(strings.Fields(rec), " "))
	}
	jsonl := strings.Join(lines, "\n") + "\n"
	for name, text := range map[string]string{"array.json": quirky, "lines.json": jsonl} {
		t.Run(name, func(t *testing.T) {
			s := &ShareGPT{Opts: ShareGPTOptions{Path: writeFile(t, name, text), Tokenizer: tok}}
			convs, err := s.Conversations(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]Conversation{}
			for _, c := range convs {
				byID[c[0].ConversationID] = c
			}
			want := map[string]int{"plain": 2, "leading": 1, "system": 2, "merge": 1, "empty": 1, "weird": 1, "plain#7": 1, "42": 1}
			if len(byID) != len(want) {
				t.Fatalf("kept %d conversations %v, want %v", len(byID), keys(byID), want)
			}
			for id, turns := range want {
				if len(byID[id]) != turns {
					t.Errorf("%s: %d turns, want %d", id, len(byID[id]), turns)
				}
			}
			sys := byID["system"][0].Messages
			if len(sys) != 2 || sys[0].Role != "system" || sys[0].Content != "You are terse." {
				t.Errorf("system prompt not on turn 0: %+v", sys)
			}
			if got := byID["merge"][0]; got.Messages[0].Content != "Part one.\n\nPart two." || got.ReferenceAnswer != "Answer A.\n\nAnswer B." {
				t.Errorf("merge: %q -> %q", got.Messages[0].Content, got.ReferenceAnswer)
			}
			if got := byID["empty"][0]; got.Messages[0].Content != "Real question?" || got.ReferenceAnswer != "Real answer." {
				t.Errorf("empty: %q -> %q", got.Messages[0].Content, got.ReferenceAnswer)
			}
			for _, c := range convs {
				for _, turn := range c {
					if int(turn.OutputTokens) != tok.Count(turn.ReferenceAnswer) {
						t.Errorf("%s/%d: max_tokens %d, answer has %d tokens", turn.ConversationID, turn.Turn, turn.OutputTokens, tok.Count(turn.ReferenceAnswer))
					}
					sum := int32(0)
					for _, m := range turn.Messages {
						sum += m.Tokens
					}
					if sum != turn.InputTokens {
						t.Errorf("input tokens %d, messages sum to %d", turn.InputTokens, sum)
					}
				}
			}
			rep := s.Report()
			wantRep := map[string]string{
				"records": "10", "kept": "8", "leading_assistant": "2", "late_system": "1",
				"merged_messages": "2", "empty_message": "2", "trailing_user": "1", "unknown_role": "1",
				"no_turns": "1", "no_messages": "1", "duplicate_id": "1",
			}
			for k, v := range wantRep {
				if rep[k] != v {
					t.Errorf("report %s = %q, want %q (report %v)", k, rep[k], v, rep)
				}
			}
		})
	}
}

func TestShareGPTFiltersAndSampling(t *testing.T) {
	tok := tokenizer.Default()
	path := writeFile(t, "q.json", quirky)
	s := &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tok, TurnsMin: 2, TurnsMax: 5}}
	convs, err := s.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 2 || s.Report()["filtered_turns"] != "6" {
		t.Fatalf("turn filter kept %d, report %v", len(convs), s.Report())
	}
	s = &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tok, OutputMin: 4}}
	convs, _ = s.Conversations(context.Background())
	for _, c := range convs {
		for _, turn := range c {
			if turn.OutputTokens < 4 {
				t.Fatalf("answer of %d tokens passed --output-tokens 4-", turn.OutputTokens)
			}
		}
	}
	if s.Report()["filtered_tokens"] == "" {
		t.Fatalf("no conversation filtered by tokens: %v", s.Report())
	}
	pick := func(seed int64) []string {
		s := &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tok, Count: 3, Seed: seed}}
		convs, err := s.Conversations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return ids(convs)
	}
	a := pick(1)
	if len(a) != 3 || strings.Join(a, ",") != strings.Join(pick(1), ",") {
		t.Fatalf("sampling 3 with seed 1: %v then %v", a, pick(1))
	}
	differ := false
	for seed := int64(2); seed < 12 && !differ; seed++ {
		differ = strings.Join(pick(seed), ",") != strings.Join(a, ",")
	}
	if !differ {
		t.Fatal("the seed does not change the sample")
	}
	s = &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tok, TurnsMin: 50}}
	if _, err := s.Conversations(context.Background()); !errors.Is(err, ErrNoConversations) || !strings.Contains(err.Error(), path) {
		t.Fatalf("everything filtered: %v", err)
	}
}

func TestShareGPTBadInput(t *testing.T) {
	tok := tokenizer.Default()
	cases := map[string]struct{ name, text, want string }{
		"missing":            {"", "", "no such file"},
		"empty":              {"e.json", "  \n", "empty file"},
		"jsonl line":         {"l.jsonl", `{"id": "a", "conversations": []}` + "\n\n" + `{"id": "b", "conversations": [}` + "\n", "line 3"},
		"jsonl field type":   {"t.jsonl", `{"id": "a", "conversations": "nope"}`, `line 1, column 36: field "conversations": want []synth.sharegptMessage, found JSON string`},
		"array syntax":       {"a.json", "[\n {\"id\": \"a\"},\n {\"id\": \"b\",, }\n]", "line 3"},
		"array after blanks": {"b.json", "\n\n  [\n {\"id\": 5 \"x\"}]", "line 4"},
		"array field type":   {"ft.json", "[\n {\"id\": \"a\"},\n {\"id\": \"b\", \"conversations\": 7}\n]", `line 3, column 31: field "conversations": want`},
		"array truncated":    {"tr.json", "[\n {\"id\": \"a\", \"conversations\": [\n", "unexpected end"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.json")
			if c.name != "" {
				path = writeFile(t, c.name, c.text)
			}
			_, err := (&ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tok}}).Conversations(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Fatalf("error %v, want one naming %s and %q", err, filepath.Base(path), c.want)
			}
		})
	}
}

func TestShareGPTSharedData(t *testing.T) {
	for _, name := range []string{"sharegpt_v3_random_sample.json", "sharegpt_v3_long_ge20msgs.json", "sharegpt_zh_1K.jsonl"} {
		path := filepath.Join("../../../shared/data/sharegpt", name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared data absent: %v", err)
		}
		t.Run(name, func(t *testing.T) {
			// Every record is read and cleaned; token counting (the slow
			// part, under -race) is only of the sampled conversations.
			s := &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: tokenizer.Default(), Count: 40, Seed: 1, TurnsMin: 4}}
			convs, err := s.Conversations(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rep := s.Report()
			t.Logf("%s: %d kept, report %v", name, len(convs), rep)
			if len(convs) == 0 || len(convs) > 40 || rep["kept"] != strconv.Itoa(len(convs)) {
				t.Fatalf("kept %d conversations, report %v", len(convs), rep)
			}
			for _, c := range convs {
				for _, turn := range c {
					if turn.OutputTokens < 1 || turn.InputTokens < 1 || turn.ReferenceAnswer == "" {
						t.Fatalf("%s/%d: input %d output %d", turn.ConversationID, turn.Turn, turn.InputTokens, turn.OutputTokens)
					}
				}
			}
		})
	}
}

func ids(convs []Conversation) []string {
	out := make([]string, len(convs))
	for i, c := range convs {
		out[i] = c[0].ConversationID
	}
	return out
}

func keys(m map[string]Conversation) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// splitTopLevel splits a JSON array's text into its elements' texts.
func splitTopLevel(t *testing.T, arr string) []string {
	t.Helper()
	var out []string
	depth, start := 0, -1
	inStr, esc := false, false
	for i, r := range arr {
		switch {
		case inStr:
			if esc {
				esc = false
			} else if r == '\\' {
				esc = true
			} else if r == '"' {
				inStr = false
			}
		case r == '"':
			inStr = true
		case r == '{':
			if depth == 1 {
				start = i
			}
			depth++
		case r == '[':
			depth++
		case r == '}':
			depth--
			if depth == 1 {
				out = append(out, arr[start:i+1])
			}
		case r == ']':
			depth--
		}
	}
	if len(out) != 10 {
		t.Fatalf("split %d records", len(out))
	}
	return out
}
