// Command bench measures every performance figure of tracekit on this
// machine and writes BENCHMARKS.md: each figure with its goal (met, or
// missed by how much), the machine, and the command that reproduces it.
//
//	make bench                    # builds bin/tracekit, then: go run ./bench
//	go run ./bench -o BENCHMARKS.md -bin bin/tracekit
//
// Data flow: stages run one after another (the machine has 2 cores; two
// loads at once would measure each other). A stage runs either the
// packages' own Go benchmarks (`go test -bench`, parsed by parseBench) or
// the tracekit binary itself (calibrate, synth, mock + replay for the
// deadlock scenario); each turns its output into figures. Every stage has
// a time limit, every load is bounded and on loopback. render writes the
// figures out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/stamp"
)

// figure is one row of BENCHMARKS.md.
type figure struct {
	Section string
	Name    string
	Value   string
	Goal    string // "" when the figure has none
	Verdict string // met / missed by ... / "" without a goal
	Command string
	Note    string // context: what the figure measures and what sets it
}

// stage measures a group of figures.
type stage struct {
	name    string
	limit   time.Duration
	measure func(ctx context.Context, e *env) ([]figure, error)
}

// env is what stages share.
type env struct {
	bin  string // tracekit binary
	work string // scratch directory
	logf func(format string, args ...any)
	// deadlockConvs scales the deadlock scenario (2,000 is full size).
	deadlockConvs int
	// cpuStreams and maxStreams size the client-CPU and many-streams
	// stages (saturation.go): a larger host runs them larger.
	cpuStreams, maxStreams int
	// liveStreams is the streams of the live view stage's pair.
	liveStreams int
}

func main() {
	stamp.ObserverMain() // the soak's replay is kernel-offset: its arrival observer is this program
	out := flag.String("o", "BENCHMARKS.md", "file to write")
	bin := flag.String("bin", "bin/tracekit", "tracekit binary to measure (make build)")
	convs := flag.Int("deadlock-conversations", 2000, "conversations of the deadlock scenario (2000 is the full size)")
	cpuStreams := flag.Int("cpu-streams", 10800, "streams of the client-CPU-per-event stage (one event every 500 ms each)")
	maxStreams := flag.Int("max-streams", 18000, "streams of the many-streams stage (one event a second each; needs that many file descriptors, and the mock as many)")
	liveStreams := flag.Int("live-streams", 10000, "streams of the live view stage's paired replays")
	only := flag.String("only", "", "run only the stage of this name (for debugging; BENCHMARKS.md is then partial)")
	soakFor := flag.Duration("soak", 0, "run only the soak for this long (make soak) and rewrite its part of the -o file")
	flag.Parse()
	began := time.Now()
	work, err := os.MkdirTemp("", "tracekit-bench-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(work)
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		fatal(fmt.Errorf("%s: build it first (make build): %w", *bin, err))
	}
	e := &env{bin: abs, work: work, deadlockConvs: *convs, cpuStreams: *cpuStreams, maxStreams: *maxStreams, liveStreams: *liveStreams,
		logf: func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Since(began).Round(time.Second), fmt.Sprintf(f, a...))
		}}

	if *soakFor > 0 {
		runSoak(e, *out, *soakFor, began)
		return
	}
	var figs []figure
	var failures []string
	for _, s := range stages() {
		if *only != "" && s.name != *only {
			continue
		}
		e.logf("%s (limit %v) ...", s.name, s.limit)
		ctx, cancel := context.WithTimeout(context.Background(), s.limit)
		t0 := time.Now()
		f, err := s.measure(ctx, e)
		cancel()
		figs = append(figs, f...)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", s.name, err))
			e.logf("%s failed after %v: %v", s.name, time.Since(t0).Round(time.Second), err)
			continue
		}
		e.logf("%s done in %v", s.name, time.Since(t0).Round(time.Second))
	}
	total := time.Since(began)
	doc := render(machine(), figs, failures, total)
	if old, err := os.ReadFile(*out); err == nil {
		if kept := keptSoak(string(old)); kept != "" {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + kept + "\n"
		}
	}
	if err := writeAtomic(*out, doc); err != nil {
		fatal(err)
	}
	e.logf("wrote %s (%d figures, %d stage failures) in %v", *out, len(figs), len(failures), total.Round(time.Second))
	if len(failures) > 0 {
		os.Exit(1)
	}
}

// stages lists every measurement in run order, cheapest first.
func stages() []stage {
	return []stage{
		{"hot paths", 3 * time.Minute, hotPaths},
		{"dispatch lag", 3 * time.Minute, dispatchLag},
		{"synth", 2 * time.Minute, synthBench},
		{"imports", 10 * time.Minute, importsBench},
		{"analyze", 2 * time.Minute, analyzeBench},
		{"agent", 4 * time.Minute, agentBench},      // agent.go
		{"send cpu", 4 * time.Minute, sendCPUBench}, // sendcpu.go
		{"mock", 3 * time.Minute, mockBench},
		{"capture proxy", 9 * time.Minute, proxyOverhead},
		{"calibrate", 4 * time.Minute, calibrateBench},
		{"calibrate endpoints", 3 * time.Minute, calibrateEndpointsBench}, // endpoints.go
		{"recording size", 3 * time.Minute, recordingSizeBench},           // recbytes.go
		{"stamps", 10 * time.Minute, stampsBench},
		{"saturation", 5 * time.Minute, saturationBench},         // saturation.go
		{"cpu per event", 8 * time.Minute, cpuPerEventBench},     // saturation.go: two 50 s steps of 10,800 streams
		{"many streams", 8 * time.Minute, manyStreamsBench},      // saturation.go
		{"live view", 5 * time.Minute, liveViewBench},            // liveview.go
		{"media make", 3 * time.Minute, mediaMakeBench},          // media.go
		{"media stamps", 10 * time.Minute, mediaStampsBench},     // media.go
		{"media dispatch", 14 * time.Minute, mediaDispatchBench}, // media.go
		{"deadlock", 6 * time.Minute, deadlockBench},
		{"shard skew", 3 * time.Minute, shardSkew},
		{"sweep", 5 * time.Minute, sweepBench},
	}
}

// runSoak is make soak: the soak alone, its section spliced into out.
func runSoak(e *env, out string, d time.Duration, began time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	figs, err := soak(ctx, e, d)
	if err != nil {
		fatal(fmt.Errorf("soak: %w", err))
	}
	old, _ := os.ReadFile(out)
	section := fmt.Sprintf("## %s\n\nOn %s; the run took %s.\n\n", figs[0].Section, strings.Join(machine(), "; "), time.Since(began).Round(time.Second)) +
		renderFigures(figs)
	if err := writeAtomic(out, spliceSoak(string(old), section)); err != nil {
		fatal(err)
	}
	for _, f := range figs {
		if strings.Contains(f.Verdict, "missed") {
			e.logf("soak: %s: %s", f.Name, f.Verdict)
			os.Exit(1)
		}
	}
	e.logf("soak: every goal met; wrote its section of %s", out)
}

// writeAtomic writes path through a temporary file in its directory.
func writeAtomic(path, doc string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
