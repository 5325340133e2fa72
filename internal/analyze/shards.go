package analyze

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// The shards of one distributed run are merged into one analysis: a
// directory argument stands for every recording in it, recordings of
// different runs (trace.RunMeta.RunID) are refused, and so is one shard
// twice. How well the shards' timelines line up is bounded by their clocks:
// each recording's times are on its own host's monotonic clock (so its
// latencies are exact whatever the other hosts do), and the recordings are
// placed on one timeline by their wall-clock starts, which the hosts'
// clocks may get wrong by their error bounds. Clocks warns when that
// uncertainty, or the spread of the shards' actual starts, exceeds
// ResolutionNs.

// ResolutionNs is the resolution of the times analyze reports: latencies
// in milliseconds with two decimals.
const ResolutionNs = 10_000

// ShardClocks is how the shards' clocks agreed, when more than one
// recording was merged.
type ShardClocks struct {
	// StartSpreadNs is the spread of the shards' actual starts
	// (trace.RunMeta.Started) on their own wall clocks.
	StartSpreadNs int64 `json:"start_spread_ns"`
	// ErrorBoundNs bounds how far two hosts' wall clocks may disagree: the
	// sum of the two largest estimated errors among shards on different
	// hosts (0 when every shard ran on one host: one clock); -1 when a
	// shard on another host had no synchronized clock (no bound).
	ErrorBoundNs int64 `json:"error_bound_ns"`
	Hosts        int   `json:"hosts"`
	// Missing are the shard indexes of the run that no file holds.
	Missing []int `json:"missing_shards,omitempty"`
}

// ExpandRuns is Expand where a directory stands for every recording in it
// (shards of one run, say). In a directory, files not ending in .parquet,
// hidden files and tracekit files of other kinds (traces, *.metrics.parquet
// sidecars, per-request tables) are skipped and listed in skipped with the
// reason; a .parquet file that cannot be read is an error, never skipped.
func ExpandRuns(args []string) (paths, skipped []string, err error) {
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil || !st.IsDir() {
			m, err := Expand([]string{a})
			if err != nil {
				return nil, nil, err
			}
			paths = append(paths, m...)
			continue
		}
		p, s, err := dirRecordings(a)
		if err != nil {
			return nil, nil, err
		}
		paths, skipped = append(paths, p...), append(skipped, s...)
	}
	return paths, skipped, nil
}

// dirRecordings lists the recordings in dir, sorted by name.
func dirRecordings(dir string) (paths, skipped []string, err error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading directory %s: %w: %w", dir, err, ErrBadInput)
	}
	for _, e := range es {
		name, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			continue
		case strings.HasSuffix(name, ".journal"):
			skipped = append(skipped, p+": the journal of a run that did not finish ('tracekit recover' makes it a recording)")
			continue
		case strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".parquet"):
			continue
		}
		r, err := trace.OpenRecording(p)
		if errors.Is(err, trace.ErrWrongFormat) {
			skipped = append(skipped, p+": not a recording")
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", err, ErrBadInput)
		}
		r.Close()
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("directory %s holds no recording: %w", dir, ErrBadInput)
	}
	return paths, skipped, nil
}

// checkRuns refuses to merge recordings of different runs, a recording
// with a run id with one without, and one shard of a run twice.
func checkRuns(files []FileInfo) error {
	if len(files) < 2 {
		return nil
	}
	first := files[0]
	seen := map[int]string{}
	for _, f := range files {
		switch {
		case f.Meta.RunID != first.Meta.RunID && (f.Meta.RunID == "" || first.Meta.RunID == ""):
			withID, without := first, f
			if first.Meta.RunID == "" {
				withID, without = f, first
			}
			return fmt.Errorf("%s is of run %q and %s has no run id (written before run ids): analyze them separately: %w",
				withID.Path, withID.Meta.RunID, without.Path, ErrBadInput)
		case f.Meta.RunID != first.Meta.RunID:
			return fmt.Errorf("%s is of run %q and %s of run %q: they are not shards of one run; analyze one run at a time: %w",
				first.Path, first.Meta.RunID, f.Path, f.Meta.RunID, ErrBadInput)
		case f.Meta.RunID == "":
			continue // older recordings: merged as before, unchecked
		}
		idx, n := shardOf(f.Meta)
		if fi, fn := shardOf(first.Meta); fn != n {
			return fmt.Errorf("run %q: %s is shard %d of %d but %s is shard %d of %d: %w", f.Meta.RunID, first.Path, fi, fn, f.Path, idx, n, ErrBadInput)
		}
		if other, ok := seen[idx]; ok {
			return fmt.Errorf("run %q: %s and %s are both shard %d (one shard recorded twice, by a retried pod or a repeated run?): %w",
				f.Meta.RunID, other, f.Path, idx, ErrBadInput)
		}
		seen[idx] = f.Path
	}
	return nil
}

// shardOf is a recording's shard index and count (0 of 1 when unsharded).
func shardOf(m trace.RunMeta) (int, int) {
	if m.Shard == nil {
		return 0, 1
	}
	return m.Shard.Index, m.Shard.Count
}

// shardClocks fills s.Clocks and warns about missing shards and about
// shards whose clocks disagree by more than ResolutionNs.
func (s *Summary) shardClocks() {
	if len(s.Files) < 2 || s.Files[0].Meta.RunID == "" {
		return // older recordings are merged as they always were
	}
	c := &ShardClocks{}
	lo, hi := s.Files[0], s.Files[0]
	hosts := map[string]bool{}
	for _, f := range s.Files {
		if f.Meta.Started() < lo.Meta.Started() {
			lo = f
		}
		if f.Meta.Started() > hi.Meta.Started() {
			hi = f
		}
		hosts[f.Meta.Host] = true
	}
	c.StartSpreadNs, c.Hosts = hi.Meta.Started()-lo.Meta.Started(), len(hosts)
	if c.StartSpreadNs > ResolutionNs {
		effect := "their schedules are offset by up to that against one another (no common --start-at)"
		if oneBarrier(s.Files) {
			// Anchored on the instant: only what was due before a shard's
			// wake-up left late, and its records say so.
			effect = "requests due before a shard's clock started left late by up to that"
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("the shards' clocks started %s apart (%s first, %s last): %s",
			fmtDur(c.StartSpreadNs), lo.Path, hi.Path, effect))
	}
	if c.Hosts > 1 {
		var unbounded []string
		var errs []int64
		for _, f := range s.Files {
			k := f.Meta.Clock
			if k == nil || k.Sync != trace.ClockSynced {
				state := "unknown"
				if k != nil {
					state = k.Sync
				}
				unbounded = append(unbounded, f.Path+" ("+state+")")
				continue
			}
			errs = append(errs, k.EstErrorNs)
		}
		slices.Sort(errs)
		switch {
		case len(unbounded) > 0:
			c.ErrorBoundNs = -1
			s.Warnings = append(s.Warnings, fmt.Sprintf("the shards ran on %d hosts and the wall clock of %s is not synchronized: the merged timeline (duration, throughput, concurrency) has no error bound; each shard's latencies are on its own clock and unaffected",
				c.Hosts, strings.Join(unbounded, ", ")))
		case len(errs) >= 2:
			c.ErrorBoundNs = errs[len(errs)-1] + errs[len(errs)-2]
		}
		if c.ErrorBoundNs > ResolutionNs {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the shards ran on %d hosts whose wall clocks may disagree by up to %s (the two largest estimated errors): the merged timeline (duration, throughput, concurrency) is uncertain by that much; each shard's latencies are on its own clock and unaffected",
				c.Hosts, fmtDur(c.ErrorBoundNs)))
		}
	}
	if m := s.Files[0].Meta; m.RunID != "" && m.Shard != nil {
		have := map[int]bool{}
		for _, f := range s.Files {
			have[f.Meta.Shard.Index] = true
		}
		for i := range m.Shard.Count {
			if !have[i] {
				c.Missing = append(c.Missing, i)
			}
		}
		if len(c.Missing) > 0 {
			sort.Ints(c.Missing)
			idx := make([]string, len(c.Missing))
			for i, v := range c.Missing {
				idx[i] = strconv.Itoa(v)
			}
			s.Warnings = append(s.Warnings, fmt.Sprintf("run %q: shard %s of %d missing: the analysis covers %d of %d shards' load",
				m.RunID, strings.Join(idx, ", "), m.Shard.Count, m.Shard.Count-len(c.Missing), m.Shard.Count))
		}
	}
	s.Clocks = c
}

// oneBarrier reports whether every file's clock was anchored on one start
// instant.
func oneBarrier(files []FileInfo) bool {
	for _, f := range files {
		if k := f.Meta.Clock; k == nil || k.StartAtNs == 0 || k.StartAtNs != files[0].Meta.Clock.StartAtNs {
			return false
		}
	}
	return true
}

// fmtDur prints ns in the unit that suits it.
func fmtDur(ns int64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + " s"
	case ns >= 1e6:
		return fmtMs(ns)
	}
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) + " us"
}
