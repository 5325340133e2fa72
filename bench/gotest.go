package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// benchRow is one line of `go test -bench` output: the benchmark's name
// without the -GOMAXPROCS suffix, its iterations, and every value/unit pair.
type benchRow struct {
	Name    string
	N       int
	Metrics map[string]float64
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads the benchmark result lines of go test output.
func parseBench(out []byte) []benchRow {
	var rows []benchRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		r := benchRow{Name: procSuffix.ReplaceAllString(f[0], ""), N: n, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r.Metrics[f[i+1]] = v
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// goBench runs `go test -run ^$ -bench pattern args... pkg` and returns its
// rows and the command line as a user would type it.
func goBench(ctx context.Context, e *env, pkg, pattern string, args ...string) ([]benchRow, string, error) {
	argv := append([]string{"test", "-run", "^$", "-bench", pattern}, args...)
	argv = append(argv, pkg)
	cmdline := "go " + shellJoin(argv)
	e.logf("  %s", cmdline)
	c := exec.CommandContext(ctx, "go", argv...)
	out, err := c.CombinedOutput()
	rows := parseBench(out)
	if err != nil {
		return rows, cmdline, fmt.Errorf("%s: %w\n%s", cmdline, err, tail(out, 2000))
	}
	if len(rows) == 0 {
		return nil, cmdline, fmt.Errorf("%s printed no benchmark result:\n%s", cmdline, tail(out, 2000))
	}
	return rows, cmdline, nil
}

// find returns the row named name.
func find(rows []benchRow, name string) (benchRow, bool) {
	for _, r := range rows {
		if r.Name == name {
			return r, true
		}
	}
	return benchRow{}, false
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// shellJoin quotes the arguments that need it for a POSIX shell.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"$|*?^()[]{}<>&;\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
