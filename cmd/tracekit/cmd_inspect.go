package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/trace"
)

// newInspectCmd builds the inspect command.
func newInspectCmd() *cobra.Command {
	var speed float64
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Summarise a trace or a recording",
		Long: `inspect detects whether FILE is a trace or a recording and prints a summary:
for a trace, rows, conversations, turns per conversation, token statistics,
think times, time span, arrival rates and burstiness, and metadata; for a
recording, requests, errors by kind, events, time span and run metadata;
for a trace's media file (trace.parquet.media, also shown with its trace),
its items and bytes by kind. The -o name of a replay --repeat set stands
for its runs: each is summarised.

Burstiness of starts and arrivals: the gamma shape of the gaps
(mean^2/variance, vLLM's --burstiness: 1 Poisson, <1 burstier, >1 more
regular), the dispersion index (variance/mean of counts) per bin of 10
mean gaps, the trace's own time scale, and per second of replay time at
--speed (what the server sees; replay --speed divides the offsets).`,
		Example: "  tracekit inspect trace.parquet\n  tracekit inspect recording.parquet",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !(speed > 0) || math.IsInf(speed, 0) {
				return badInput(fmt.Errorf("--speed %g: want a time compression above 0 (replay's --speed)", speed))
			}
			if set := analyze.FindRunSet(args[0]); len(set) > 0 {
				for _, p := range set {
					if err := inspectFile(cmd.OutOrStdout(), p, speed); err != nil {
						return err
					}
				}
				return nil
			}
			return inspectFile(cmd.OutOrStdout(), args[0], speed)
		},
	}
	cmd.Flags().Float64Var(&speed, "speed", 1, "a trace's arrival statistics at this replay speed (replay --speed)")
	return cmd
}

// inspectFile prints the summary of the trace or recording at path.
func inspectFile(w io.Writer, path string, speed float64) error {
	s, err := trace.SummarizeTraceAt(path, speed)
	if err == nil {
		printTraceSummary(w, path, s)
		return nil
	}
	if !errors.Is(err, trace.ErrWrongFormat) {
		return badInput(err)
	}
	if ms, merr := trace.OpenMediaFile(path); merr == nil {
		printMediaFile(w, "media file "+path, ms)
		ms.Close()
		return nil
	} else if !errors.Is(merr, trace.ErrWrongFormat) && !errors.Is(merr, fs.ErrNotExist) {
		return badInput(merr)
	}
	rs, rerr := trace.SummarizeRecording(path)
	if rerr != nil {
		if errors.Is(rerr, trace.ErrWrongFormat) {
			return badInput(fmt.Errorf("%s is neither a tracekit trace nor a recording: %w", path, rerr))
		}
		return badInput(rerr)
	}
	printRecordingSummary(w, path, rs)
	return nil
}

func printTraceSummary(w io.Writer, path string, s trace.TraceSummary) {
	fmt.Fprintf(w, "trace %s\n", path)
	fmt.Fprintf(w, "  rows                %d\n", s.Rows)
	fmt.Fprintf(w, "  conversations       %d\n", s.Conversations)
	fmt.Fprintf(w, "  turns/conversation  %s\n", s.TurnsPerConv)
	fmt.Fprintf(w, "  input tokens/turn   %s\n", s.InputTokens)
	fmt.Fprintf(w, "  output tokens/turn  %s\n", s.OutputTokens)
	fmt.Fprintf(w, "  think time          %s\n", s.ThinkTimeSec.Durations())
	fmt.Fprintf(w, "  reference answers   %d of %d turns\n", s.WithReference, s.Rows)
	if s.WithPrefix > 0 {
		fmt.Fprintf(w, "  prefix hashes       %d turns\n", s.WithPrefix)
	}
	if g := s.Meta.Prompts; g != nil {
		fmt.Fprintf(w, "  virtual prompts     %s under %s, %d-token blocks (replay makes the text)\n", g.Name, g.Tokenizer, g.BlockSize)
	}
	if len(s.Models) > 0 {
		fmt.Fprintf(w, "  models              %s\n", modelCounts(s.Models))
	}
	fmt.Fprintf(w, "  time span           %s (first start to last open-loop arrival, trace time)\n", trace.FormatDuration(s.SpanNs))
	printRate(w, "conversation starts", s.Starts)
	printRate(w, "turn arrivals", s.Arrivals)
	switch ms, err := trace.OpenMediaFile(trace.MediaPath(path)); {
	case err == nil:
		printMediaFile(w, "  media file          "+filepath.Base(ms.Path()), ms)
		ms.Close()
	case !errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(w, "  media file          unreadable: %v\n", err)
	}
	m := s.Meta
	fmt.Fprintf(w, "metadata\n  source %s  tokenizer %s  seed %d  tracekit %s  created %s\n  command %s\n", m.Source, m.Tokenizer, m.Seed, m.TracekitVersion, m.CreatedAt, m.Command)
	printOptions(w, m.Options)
}

// printMediaFile prints a media file's items and bytes, by kind, after
// head.
func printMediaFile(w io.Writer, head string, ms *trace.MediaStore) {
	fmt.Fprintf(w, "%s: %d items, %s", head, ms.Len(), byteSize(ms.Bytes()))
	kinds := ms.Kinds()
	for _, k := range []string{trace.MediaImage, trace.MediaVideo, trace.MediaAudio} {
		if c, ok := kinds[k]; ok {
			fmt.Fprintf(w, "; %s %d (%s)", k, c.Items, byteSize(c.Bytes))
		}
	}
	fmt.Fprintln(w)
}

// printRate prints arrival statistics: rate and span at the speed, then
// the burstiness on the trace's own scale and per replay second.
func printRate(w io.Writer, label string, r trace.RateStats) {
	at := ""
	if r.Speed != 1 {
		at = fmt.Sprintf(" at --speed %g", r.Speed)
	}
	fmt.Fprintf(w, "  %-19s %s/s over %s%s\n", label, sig(r.PerSecond), trace.FormatDuration(r.SpanNs), at)
	fmt.Fprintf(w, "    burstiness        gamma shape %s; dispersion index %s per %s (10 mean gaps), %s per second%s\n",
		orUnknown(r.Burstiness), orUnknown(r.OwnDispersion), binText(r.OwnBinNs), orUnknown(r.Dispersion), at)
}

func binText(ns int64) string {
	if ns <= 0 {
		return "n/a"
	}
	return trace.FormatDuration(ns)
}

// sig writes v with 4 significant digits, without exponent for the
// values a rate takes.
func sig(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// orUnknown is sig, or "n/a" for 0 (too few arrivals or bins to tell).
func orUnknown(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// modelCounts lists the models of a trace with their turns, the most used
// first: "tracekit-mock (60 turns), small (2 turns)".
func modelCounts(m map[string]int) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int {
		if c := m[b] - m[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		unit := "turns"
		if m[n] == 1 {
			unit = "turn"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", n, m[n], unit)
	}
	return strings.Join(parts, ", ")
}

// printOptions prints a string map (options, import reports) one key a
// line, sorted.
func printOptions(w io.Writer, opts map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		fmt.Fprintf(w, "  %-28s %s\n", k, opts[k])
	}
}

func printRecordingSummary(w io.Writer, path string, s trace.RecordingSummary) {
	fmt.Fprintf(w, "recording %s\n", path)
	fmt.Fprintf(w, "  requests        %d (%d ok, %d failed, %d warm-up, %d retries)\n", s.Rows, s.OK, int(s.Rows)-s.OK, s.Warmup, s.Retries)
	fmt.Fprintf(w, "  conversations   %d\n", s.Conversations)
	kinds := make([]string, 0, len(s.Errors))
	for k := range s.Errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  error %-16s %d\n", k, s.Errors[k])
	}
	fmt.Fprintf(w, "  stream events   %d carrying %d tokens\n", s.Events, s.Tokens)
	fmt.Fprintf(w, "  time span       %v (first send to last completion)\n", time.Duration(s.SpanNs).Round(time.Millisecond))
	fmt.Fprintf(w, "  TTFT (ms)       %s\n", s.TTFTms)
	fmt.Fprintf(w, "  E2EL (ms)       %s\n", s.E2ELms)
	m := s.Meta
	fmt.Fprintf(w, "run metadata\n  tracekit %s  host %s  targets %s\n  started %s (monotonic %d ns)\n  command %s\n",
		m.TracekitVersion, m.Host, strings.Join(m.Targets, ", "), time.Unix(0, m.StartWallNs).UTC().Format(time.RFC3339Nano), m.StartMonoNs, m.Command)
	if m.Trace != nil {
		fmt.Fprintf(w, "  trace: source %s, seed %d, tokenizer %s\n", m.Trace.Source, m.Trace.Seed, m.Trace.Tokenizer)
	}
	if file, _ := m.Config["trace"].(string); file != "" {
		sum := analyze.TraceDigest(m)
		if sum == "" {
			sum = "not recorded"
		}
		fmt.Fprintf(w, "  trace file %s, SHA-256 %s\n", file, sum)
	}
	if m.Health != nil {
		h := m.Health
		obs := ""
		if h.ObserverCPUSeconds > 0 {
			obs = fmt.Sprintf(" (arrival observer %.2fs of it)", h.ObserverCPUSeconds)
		}
		fmt.Fprintf(w, "  client health: dispatch lag p50 %s p99 %s max %s, cpu %.1fs%s over %.1fs wall\n",
			trace.FormatDuration(h.DispatchLagP50Ns), trace.FormatDuration(h.DispatchLagP99Ns), trace.FormatDuration(h.DispatchLagMaxNs), h.CPUSeconds, obs, h.WallSeconds)
		for _, warn := range h.Assess() {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
	}
	if len(m.Config) > 0 {
		b, _ := json.Marshal(m.Config)
		fmt.Fprintf(w, "  config %s\n", b)
	}
}
