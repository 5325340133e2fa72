package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// BENCHMARKS.md is exactly what the generator writes: read back into the
// machine, the figures (with their commands and notes) and the kept soak
// part, and rendered again, it gives the same bytes. A paragraph written by
// hand, or a generator whose format drifted from the file, fails it.
func TestBenchmarksMDIsGenerated(t *testing.T) {
	b, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	p, err := parseBenchmarksMD(doc)
	if err != nil {
		t.Fatalf("BENCHMARKS.md: %v", err)
	}
	if len(p.figs) < 50 {
		t.Fatalf("BENCHMARKS.md: only %d figures read back", len(p.figs))
	}
	again := render(p.mach, p.figs, p.failures, p.total)
	if p.soak != "" {
		again = strings.TrimRight(again, "\n") + "\n\n" + p.soak + "\n"
	}
	if again != doc {
		t.Fatalf("BENCHMARKS.md is not what the generator writes: %s", firstDiff(doc, again))
	}
	if p.soak != "" {
		sec, err := parseSoakSection(p.soak)
		if err != nil {
			t.Fatalf("BENCHMARKS.md soak part: %v", err)
		}
		if got := spliceSoak("", sec.render()); strings.TrimLeft(got, "\n") != p.soak+"\n" {
			t.Fatalf("BENCHMARKS.md soak part is not what make soak writes: %s", firstDiff(p.soak+"\n", strings.TrimLeft(got, "\n")))
		}
	}
	if m := diaryWords.FindString(doc); m != "" {
		t.Errorf("BENCHMARKS.md speaks of how tracekit is developed: %q", m)
	}
}

// The round trip can fail: a paragraph added between a table and the next
// section is found.
func TestBenchmarksMDRoundTripCatchesProse(t *testing.T) {
	figs := []figure{
		{Section: "A", Name: "x", Value: "1 s", Goal: "<= 2 s", Verdict: "met", Command: "go test ./a/", Note: "why x"},
		{Section: "A", Name: "y | z", Value: "3", Command: "go test ./a/"},
		{Section: "B", Name: "w", Value: "4", Verdict: "**missed** by 1", Goal: "<= 3", Command: "bin/tracekit calibrate"},
	}
	doc := render([]string{"CPU: test"}, figs, []string{"c: failed"}, 90*time.Second)
	p, err := parseBenchmarksMD(doc)
	if err != nil {
		t.Fatal(err)
	}
	if again := render(p.mach, p.figs, p.failures, p.total); again != doc {
		t.Fatalf("round trip of a rendered file: %s", firstDiff(doc, again))
	}
	edited := strings.Replace(doc, "\n## B\n", "\nA paragraph by hand.\n\n## B\n", 1)
	p, err = parseBenchmarksMD(edited)
	if err == nil && render(p.mach, p.figs, p.failures, p.total) == edited {
		t.Fatal("a hand-written paragraph went through the round trip")
	}
}

// diaryWords are words about how the project is developed, which the
// generated file never contains.
var diaryWords = regexp.MustCompile(`(?i)session\s[0-9]|the\sissue|branch\sr[0-9]|hand-written|\.\./shared`)

// parsedMD is BENCHMARKS.md read back.
type parsedMD struct {
	mach     []string
	figs     []figure
	failures []string
	total    time.Duration
	soak     string // the kept soak block, markers included
}

const (
	commandsHeading = "## Commands and notes\n\nEach command reproduces its figure from the repository root after `make build`.\n"
	tableHead       = "| figure | value | goal | verdict |\n|---|---|---|---|\n"
	tookPrefix      = "- the whole run took "
)

// parseBenchmarksMD reads what render wrote (and main appended) back.
func parseBenchmarksMD(doc string) (parsedMD, error) {
	var p parsedMD
	if i := strings.Index(doc, soakBegin); i >= 0 {
		k := strings.Index(doc, soakEnd)
		if k < i {
			return p, fmt.Errorf("%q without %q", soakBegin, soakEnd)
		}
		p.soak = doc[i : k+len(soakEnd)]
		doc = doc[:i]
	}
	head, rest, ok := strings.Cut(doc, "\n## Summary\n\n")
	if !ok {
		return p, fmt.Errorf("no summary section")
	}
	_, machine, ok := strings.Cut(head, "## Machine\n\n")
	if !ok {
		return p, fmt.Errorf("no machine section")
	}
	for _, l := range strings.Split(machine, "\n") {
		switch {
		case strings.HasPrefix(l, tookPrefix):
			d, err := time.ParseDuration(strings.TrimPrefix(l, tookPrefix))
			if err != nil {
				return p, fmt.Errorf("machine: %q: %w", l, err)
			}
			p.total = d
		case strings.HasPrefix(l, "- "):
			p.mach = append(p.mach, strings.TrimPrefix(l, "- "))
		}
	}
	if _, failed, ok := strings.Cut(rest, "\nStages that failed to run (their figures are missing or partial):\n\n"); ok {
		for _, l := range strings.Split(failed, "\n") {
			if !strings.HasPrefix(l, "- ") {
				break
			}
			p.failures = append(p.failures, strings.ReplaceAll(strings.TrimPrefix(l, "- "), "\\|", "|"))
		}
	}
	tables, notes, ok := strings.Cut(rest, "\n"+commandsHeading)
	if !ok {
		return p, fmt.Errorf("no %q section", "Commands and notes")
	}
	// The tables: "\n## S\n\n" and its rows.
	for _, part := range strings.Split(tables, "\n## ")[1:] {
		name, body, _ := strings.Cut(part, "\n\n")
		figs, err := parseTable(name, body)
		if err != nil {
			return p, err
		}
		p.figs = append(p.figs, figs...)
	}
	// The commands and notes: "\n### S\n\n", command blocks and note lines.
	bySection := map[string][]string{}
	for _, part := range strings.Split(notes, "\n### ")[1:] {
		name, body, _ := strings.Cut(part, "\n\n")
		bySection[name] = append(bySection[name], body)
	}
	seen := map[string]bool{}
	for start := 0; start < len(p.figs); {
		end := start
		for end < len(p.figs) && p.figs[end].Section == p.figs[start].Section {
			end++
		}
		bodies := bySection[p.figs[start].Section]
		if len(bodies) != 1 {
			return p, fmt.Errorf("section %q: %d parts under %q", p.figs[start].Section, len(bodies), "Commands and notes")
		}
		if err := assignCommands(p.figs[start:end], bodies[0], seen); err != nil {
			return p, fmt.Errorf("section %q: %w", p.figs[start].Section, err)
		}
		start = end
	}
	return p, nil
}

// parseTable reads one section's table; body starts at its head.
func parseTable(section, body string) ([]figure, error) {
	rows, ok := strings.CutPrefix(body, tableHead)
	if !ok {
		return nil, fmt.Errorf("section %q: no table right after its heading", section)
	}
	var figs []figure
	for _, l := range strings.Split(strings.TrimRight(rows, "\n"), "\n") {
		cells := splitRow(l)
		if len(cells) != 4 {
			return nil, fmt.Errorf("section %q: not a table row: %q", section, l)
		}
		f := figure{Section: section, Name: cells[0], Value: cells[1], Goal: cells[2], Verdict: cells[3]}
		if f.Goal == "-" {
			f.Goal = ""
		}
		if f.Verdict == "-" {
			f.Verdict = ""
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// splitRow splits "| a | b \| c | d |" into its cells, unescaped.
func splitRow(l string) []string {
	l, ok1 := strings.CutPrefix(l, "| ")
	l, ok2 := strings.CutSuffix(l, " |")
	if !ok1 || !ok2 {
		return nil
	}
	var cells []string
	var c strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			c.WriteByte('|')
			i++
		case strings.HasPrefix(l[i:], " | "):
			cells = append(cells, c.String())
			c.Reset()
			i += 2
		default:
			c.WriteByte(l[i])
		}
	}
	return append(cells, c.String())
}

// assignCommands gives figs (one section's, in order) the commands and
// notes of body as render wrote them: a command block comes before the
// first figure that has it (once in the whole file), a note line
// "- NAME: NOTE" after its figure's command.
func assignCommands(figs []figure, body string, seen map[string]bool) error {
	type item struct{ cmd, note string }
	var items []item
	lines := strings.Split(body, "\n")
	for i := 0; i < len(lines); i++ {
		switch l := lines[i]; {
		case l == "":
		case l == "```":
			var cmd []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				cmd = append(cmd, lines[i])
			}
			items = append(items, item{cmd: strings.Join(cmd, "\n")})
		case strings.HasPrefix(l, "- "):
			items = append(items, item{note: strings.TrimPrefix(l, "- ")})
		default:
			return fmt.Errorf("neither a command nor a figure's note: %q", l)
		}
	}
	j, current := 0, ""
	for k := range figs {
		f := &figs[k]
		if j < len(items) && items[j].cmd != "" && !seen[items[j].cmd] {
			current = items[j].cmd
			seen[current] = true
			j++
		}
		f.Command = current
		if j < len(items) && items[j].cmd == "" && strings.HasPrefix(items[j].note, f.Name+": ") {
			f.Note = strings.TrimPrefix(items[j].note, f.Name+": ")
			j++
		}
	}
	if j < len(items) {
		return fmt.Errorf("left over: %+v", items[j])
	}
	return nil
}

// soakSection is the soak part read back.
type soakSection struct {
	name, on, took string
	figs           []figure
}

func (s soakSection) render() string {
	return fmt.Sprintf("## %s\n\nOn %s; the run took %s.\n\n", s.name, s.on, s.took) + renderFigures(s.figs)
}

// parseSoakSection reads the block runSoak writes between the markers.
func parseSoakSection(block string) (soakSection, error) {
	var s soakSection
	body, ok := strings.CutPrefix(block, soakBegin+"\n## ")
	if !ok {
		return s, fmt.Errorf("no heading after %q", soakBegin)
	}
	body = strings.TrimSuffix(body, soakEnd)
	s.name, body, _ = strings.Cut(body, "\n\n")
	line, body, _ := strings.Cut(body, "\n\n")
	on, ok := strings.CutPrefix(line, "On ")
	if !ok {
		return s, fmt.Errorf("no machine line: %q", line)
	}
	i := strings.LastIndex(on, "; the run took ")
	if i < 0 || !strings.HasSuffix(on, ".") {
		return s, fmt.Errorf("machine line: %q", line)
	}
	s.on, s.took = on[:i], strings.TrimSuffix(on[i+len("; the run took "):], ".")
	table, notes, _ := strings.Cut(body, "\n\n")
	figs, err := parseTable(s.name, table+"\n")
	if err != nil {
		return s, err
	}
	if err := assignCommands(figs, notes, map[string]bool{}); err != nil {
		return s, err
	}
	s.figs = figs
	return s, nil
}

// firstDiff names the first line where got differs from want.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d is\n\t%.300q\nthe generator writes\n\t%.300q", i+1, wl, gl)
		}
	}
	return "same lines, different bytes"
}
