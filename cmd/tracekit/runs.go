package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/analyze"
)

// runSetPaths lists the runs named by args: each argument is one run (a
// recording, or a glob whose matches are each one run), or the -o name a
// replay --repeat set was written under, which stands for its
// OUT-1..OUT-N.
func runSetPaths(args []string) ([]string, error) {
	var paths []string
	for _, a := range args {
		if set := analyze.FindRunSet(a); len(set) > 0 {
			paths = append(paths, set...)
			continue
		}
		p, err := analyze.Expand([]string{a})
		if err != nil {
			return nil, err
		}
		paths = append(paths, p...)
	}
	return paths, nil
}

// namesRunSet reports whether an argument is the -o name of a run set.
func namesRunSet(args []string) bool {
	for _, a := range args {
		if len(analyze.FindRunSet(a)) > 0 {
			return true
		}
	}
	return false
}

// aggregateRuns analyzes each path as one run and aggregates them.
func aggregateRuns(paths []string, opts analyze.Options, conf float64) (*analyze.RunSet, error) {
	sums := make([]*analyze.Summary, len(paths))
	for i, p := range paths {
		s, err := analyze.Files([]string{p}, opts)
		if err != nil {
			return nil, err
		}
		sums[i] = s
	}
	return analyze.AggregateRuns(paths, sums, conf)
}

// checkConfidence checks --confidence.
func checkConfidence(conf float64) error {
	if !(conf > 0 && conf < 1) {
		return badInput(fmt.Errorf("--confidence %g: expected a level between 0 and 1, e.g. 0.95", conf))
	}
	return nil
}

// runSetOutputs are analyze's outputs as --runs writes them.
type runSetOutputs struct {
	json, html, perRequest string
	quiet                  bool
}

// analyzeRunSet is analyze --runs: the aggregate of the runs as text, JSON
// and HTML.
func analyzeRunSet(cmd interface {
	OutOrStdout() io.Writer
}, args []string, opts analyze.Options, conf float64, out runSetOutputs) error {
	if err := checkConfidence(conf); err != nil {
		return err
	}
	if out.perRequest != "" {
		return badInput(fmt.Errorf("--per-request writes one run's requests: not with --runs"))
	}
	paths, err := runSetPaths(args)
	if err != nil {
		return analyzeErr(err)
	}
	rs, err := aggregateRuns(paths, opts, conf)
	if err != nil {
		return analyzeErr(err)
	}
	if !out.quiet {
		if err := rs.WriteText(cmd.OutOrStdout()); err != nil {
			return err
		}
	}
	if out.json != "" {
		if err := writeFile(out.json, func(f io.Writer) error { return rs.WriteJSON(f) }); err != nil {
			return err
		}
	}
	if out.html != "" {
		if err := writeFile(out.html, func(f io.Writer) error { return rs.WriteHTML(f) }); err != nil {
			return err
		}
	}
	return nil
}

// runsGate are compare's options for run sets.
type runsGate struct {
	confidence float64
	beyondCI   bool
	verdict    string
	html       string // the page's path, "" for none
}

// compareRunSets is compare with a run set on either side (sets[i] the
// runs of args[i], empty for a single recording): the means side by side
// and the gate on them.
func compareRunSets(cmd *cobra.Command, args []string, sets [2][]string, opts analyze.Options, gate []analyze.GateCondition, g runsGate) error {
	if err := checkConfidence(g.confidence); err != nil {
		return err
	}
	var rs [2]*analyze.RunSet
	for i, arg := range args {
		paths := sets[i]
		if len(paths) == 0 {
			var err error
			if paths, err = analyze.Expand([]string{arg}); err != nil {
				return analyzeErr(err)
			}
			if len(paths) != 1 {
				return badInput(fmt.Errorf("%s: %d recordings; against a run set, give one recording or the -o name of another set", arg, len(paths)))
			}
		}
		var err error
		if rs[i], err = aggregateRuns(paths, opts, g.confidence); err != nil {
			return analyzeErr(err)
		}
	}
	out := cmd.OutOrStdout()
	if err := analyze.WriteCompareRuns(out, rs[0], rs[1], args[0], args[1]); err != nil {
		return err
	}
	if g.html != "" {
		if err := writeFile(g.html, func(f io.Writer) error { return analyze.WriteCompareRunsHTML(f, rs[0], rs[1], args[0], args[1]) }); err != nil {
			return err
		}
	}
	if len(gate) == 0 {
		return nil
	}
	results, err := analyze.EvaluateGateRuns(gate, rs[0], rs[1], g.beyondCI)
	if err != nil {
		return badInput(err)
	}
	return finishGate(cmd, results, args, g.verdict)
}
