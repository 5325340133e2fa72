package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// docFiles are the documents a newcomer reads: README.md, CONTRIBUTING.md
// and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "CONTRIBUTING.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatalf("listing docs/: %v", err)
	}
	return files
}

// Every `tracekit ...` command line in a fenced shell block of the README
// and docs/ names a subcommand that exists and only flags it has, with an
// argument count it accepts. Nothing is run: the lines are checked against
// the command tree newRoot builds.
func TestDocCommandsParse(t *testing.T) {
	total := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, f)
		cmds := docCommands(name, string(src))
		total += len(cmds)
		for _, c := range cmds {
			if err := checkDocCommand(c); err != nil {
				t.Error(err)
			}
		}
	}
	// The README and docs show far more invocations than this; finding
	// fewer means the extraction broke, not that the docs are clean.
	if total < 40 {
		t.Fatalf("found only %d tracekit command lines in the docs", total)
	}
}

// The checker itself: it finds the lines the docs write (continuations,
// prompts, quotes across lines, env assignments, pipes, comments) and
// names the file, line and flag of each mistake.
func TestDocCommandCheckerFindsMistakes(t *testing.T) {
	doc := "# page\n" + // 1
		"```\n" + // 2
		"tracekit synth --conversations 3 \\\n" + // 3
		"    --no-such-flag -o t.parquet\n" + // 4
		"OPENAI_API_KEY=x tracekit replay t.parquet --target http://h:1 --bogus=1   # a comment --hidden\n" + // 5
		"tracekit frobnicate --x\n" + // 6
		"tracekit mock --listen 127.0.0.1:0 & tracekit analyze a.parquet -q --nope | head\n" + // 7
		"tracekit synth --from-vllm 'vllm bench serve\n" + // 8
		"    --not-a-tracekit-flag 1' -o t.parquet\n" + // 9
		"tracekit inspect a b\n" + // 10
		"```\n" + // 11
		"```console\n" + // 12
		"$ tracekit version --verbose\n" + // 13
		"tracekit version --output-line-is-not-a-command\n" + // 14
		"```\n" + // 15
		"```text\n" + // 16
		"tracekit synth --in-a-text-block\n" + // 17
		"```\n" // 18
	var got []string
	for _, c := range docCommands("page.md", doc) {
		if err := checkDocCommand(c); err != nil {
			got = append(got, err.Error())
		}
	}
	want := []string{
		"page.md:3: tracekit synth: unknown flag --no-such-flag",
		"page.md:5: tracekit replay: unknown flag --bogus",
		"page.md:6: tracekit frobnicate: no such command",
		"page.md:7: tracekit analyze: unknown flag --nope",
		"page.md:10: tracekit inspect: accepts 1 arg(s), received 2",
		"page.md:13: tracekit version: unknown flag --verbose",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("checker reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docCommand is one tracekit invocation found in a document.
type docCommand struct {
	file string
	line int      // of its first physical line
	args []string // after "tracekit"
}

// shellFences are the fenced-block languages whose lines are command lines;
// other blocks (text, json, python, sql, yaml...) are not invocations.
var shellFences = map[string]bool{"": true, "sh": true, "shell": true, "bash": true, "console": true}

// docCommands extracts the tracekit invocations of src's fenced shell
// blocks. In a block with "$ " prompts only the prompted lines are
// commands (the rest is output).
func docCommands(file, src string) []docCommand {
	lines := strings.Split(src, "\n")
	var out []docCommand
	for i := 0; i < len(lines); i++ {
		open := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(open, "```") {
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(open, "```"))
		start := i + 1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "```") {
			end++
		}
		i = end
		if !shellFences[lang] {
			continue
		}
		block := lines[start:end]
		prompted := false
		for _, l := range block {
			if strings.HasPrefix(strings.TrimSpace(l), "$ ") {
				prompted = true
			}
		}
		for k := 0; k < len(block); k++ {
			l := strings.TrimSpace(block[k])
			if prompted {
				if !strings.HasPrefix(l, "$ ") {
					continue
				}
				l = strings.TrimPrefix(l, "$ ")
			}
			first := start + k + 1
			// Join continuations: a trailing backslash, or a quote
			// still open at the end of the line.
			for k+1 < len(block) {
				if strings.HasSuffix(l, "\\") {
					l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(block[k+1])
				} else if openQuote(l) {
					l += "\n" + strings.TrimSpace(block[k+1])
				} else {
					break
				}
				k++
			}
			for _, words := range shellCommands(l) {
				for len(words) > 0 && envAssign.MatchString(words[0]) {
					words = words[1:]
				}
				if len(words) < 2 || (words[0] != "tracekit" && !strings.HasSuffix(words[0], "/tracekit")) {
					continue
				}
				if !subcommandWord.MatchString(words[1]) && !strings.HasPrefix(words[1], "-") {
					continue // prose that starts with the name, not an invocation
				}
				out = append(out, docCommand{file: file, line: first, args: words[1:]})
			}
		}
	}
	return out
}

var (
	envAssign      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	subcommandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// openQuote reports whether s ends inside a single- or double-quoted string.
func openQuote(s string) bool {
	var q rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case q == 0 && r == '\\', q == '"' && r == '\\':
			esc = true
		case q == 0 && (r == '\'' || r == '"'):
			q = r
		case r == q:
			q = 0
		}
	}
	return q != 0
}

// shellCommands splits one logical shell line into its simple commands'
// words: quotes removed, a comment dropped, split at | & ; && ||, a
// redirection and its file left out, $(...) kept as one word.
func shellCommands(s string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		flush()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	skipNext := false // the word after a redirection is its file
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\'':
			inWord = true
			for i++; i < len(rs) && rs[i] != '\''; i++ {
				w.WriteRune(rs[i])
			}
		case r == '"':
			inWord = true
			for i++; i < len(rs) && rs[i] != '"'; i++ {
				if rs[i] == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[i+1]) {
					i++
				}
				w.WriteRune(rs[i])
			}
		case r == '\\' && i+1 < len(rs):
			inWord = true
			i++
			w.WriteRune(rs[i])
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			inWord = true
			depth := 0
			for ; i < len(rs); i++ {
				w.WriteRune(rs[i])
				if rs[i] == '(' {
					depth++
				} else if rs[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
		case r == '#' && !inWord:
			i = len(rs)
		case r == '|' || r == '&' || r == ';':
			endCmd()
			if i+1 < len(rs) && rs[i+1] == r {
				i++
			}
		case r == '>' || r == '<':
			flush()
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			skipNext = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord && skipNext {
				w.Reset()
				inWord, skipNext = false, false
				continue
			}
			flush()
		default:
			inWord = true
			w.WriteRune(r)
		}
	}
	if skipNext {
		w.Reset()
		inWord = false
	}
	endCmd()
	return cmds
}

// checkDocCommand checks one invocation against the command tree: the
// subcommand exists, every flag is one it has (a flag taking a value
// takes the next word), and the positional arguments are a count it
// accepts.
func checkDocCommand(c docCommand) error {
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	at := fmt.Sprintf("%s:%d: tracekit %s", c.file, c.line, c.args[0])
	cmd, rest, err := root.Find(c.args)
	if err != nil || (cmd == root && !strings.HasPrefix(c.args[0], "-")) {
		return fmt.Errorf("%s: no such command", at)
	}
	at = fmt.Sprintf("%s:%d: %s", c.file, c.line, cmd.CommandPath())
	cmd.InitDefaultHelpFlag()
	// lookup says whether the command has the flag (by long name, or by
	// shorthand when long is empty) and whether it takes a value.
	lookup := func(long, short string) (known, takesValue bool) {
		f := cmd.Flags().ShorthandLookup(short)
		if long != "" {
			if f = cmd.Flags().Lookup(long); f == nil {
				f = cmd.InheritedFlags().Lookup(long)
			}
		}
		if f == nil {
			return false, false
		}
		return true, f.NoOptDefVal == ""
	}
	var positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			known, takesValue := lookup(name, "")
			if !known {
				return fmt.Errorf("%s: unknown flag --%s", at, name)
			}
			if takesValue && !hasValue {
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			name, _, hasValue := strings.Cut(a[1:], "=")
			known, takesValue := lookup("", name)
			if !known {
				return fmt.Errorf("%s: unknown flag -%s", at, name)
			}
			if takesValue && !hasValue {
				i++
			}
		default:
			positional = append(positional, a)
		}
	}
	if err := cmd.ValidateArgs(positional); err != nil {
		return fmt.Errorf("%s: %v", at, err)
	}
	return nil
}

// Every relative link of the README and docs/ points at a file that exists
// and, with a #fragment, at a heading of that file.
func TestDocLinks(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, f)
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %s: %v", name, i+1, target, err)
					continue
				}
				if frag != "" && !headingAnchors(t, dest)[frag] {
					t.Errorf("%s:%d: link %s: no heading with that anchor in %s", name, i+1, target, dest)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("found only %d relative links", n)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchors are the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation but - and _ dropped, spaces as dashes.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	inFence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var a strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchors[a.String()] = true
	}
	return anchors
}
