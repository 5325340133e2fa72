package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
)

// Distributed runs: n replay processes (a Kubernetes Indexed Job, one pod
// per shard) that are one run. They share a start instant (--start-at), a
// run id (--run-id, else derived from the trace and the instant) and a
// trace (often a URL), and write one recording each, named by shard.

// indexEnv is the variable Kubernetes sets in each pod of an Indexed Job.
const indexEnv = "JOB_COMPLETION_INDEX"

// shardPlaceholder in -o is replaced by the shard index.
const shardPlaceholder = "{shard}"

// distOpts are replay's flags for distributed runs.
type distOpts struct {
	shards        int
	runID         string
	startAt       string
	maxTraceBytes int64
}

func (d *distOpts) register(f *pflag.FlagSet) {
	f.IntVar(&d.shards, "shards", 0, "shard count; without --shard the index is read from $"+indexEnv+" (Kubernetes Indexed Jobs)")
	f.StringVar(&d.runID, "run-id", "", "id shared by every shard of one run (default: from the trace's content and the start instant)")
	f.StringVar(&d.startAt, "start-at", "", "start the clock at this instant, once the targets are ready: RFC 3339 (2026-12-01T12:00:00Z, the same for every shard) or +DURATION from now, at most 24h away; fails if it has passed")
	d.maxTraceBytes = 4 << 30
	f.Var((*sizeValue)(&d.maxTraceBytes), "max-trace-bytes", "largest trace, and largest media file, downloaded when TRACE is an http(s) URL (bytes, or e.g. 512MiB, 8GiB)")
}

// apply settles the shard (--shard, or --shards with the index from the
// environment), the output's name, --start-at and --run-id. Its errors are
// bad usage.
func (d *distOpts) apply(fs *pflag.FlagSet, c *replay.Config, o *replayOpts, getenv func(string) string) error {
	fromEnv := false
	if fs.Changed("shards") {
		if d.shards < 1 {
			return fmt.Errorf("--shards %d: expected a shard count of 1 or more", d.shards)
		}
		switch {
		case fs.Changed("shard"):
			if c.Shards != d.shards {
				return fmt.Errorf("--shard %d/%d and --shards %d disagree on the shard count", c.Shard, c.Shards, d.shards)
			}
		default:
			i, err := envIndex(getenv, d.shards)
			if err != nil {
				return err
			}
			c.Shard, c.Shards, fromEnv = i, d.shards, true
		}
	}
	o.out = shardOutput(o.out, c.Shard, c.Shards, fromEnv)
	if d.startAt != "" {
		at, err := parseStartAt(d.startAt, time.Now())
		if err != nil {
			return err
		}
		c.StartAt = at
		if err := c.CheckStart(); err != nil {
			return startAtErr(d.startAt, err)
		}
	}
	if d.runID != "" {
		if err := replay.CheckRunID(d.runID); err != nil {
			return fmt.Errorf("--run-id: %w", err)
		}
		c.RunID = d.runID
	}
	return nil
}

// envIndex reads the shard index of a run of n shards from the environment.
func envIndex(getenv func(string) string, n int) (int, error) {
	v := getenv(indexEnv)
	if v == "" {
		return 0, fmt.Errorf("--shards %d without --shard: the shard index comes from $%s (Kubernetes sets it in Indexed Jobs), which is not set: pass --shard i/%d or run in an Indexed Job", n, indexEnv, n)
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= n {
		return 0, fmt.Errorf("$%s=%q: expected a shard index from 0 to %d (--shards %d)", indexEnv, v, n-1, n)
	}
	return i, nil
}

// shardOutput names shard i of n's recording: {shard} in out becomes the
// index, zero-padded to the width of n-1 (so names sort); without the
// placeholder an index taken from the environment inserts ".shard-I"
// before the extension (every pod gets its own file from one manifest),
// and an explicit --shard keeps out as given.
func shardOutput(out string, i, n int, fromEnv bool) string {
	idx := fmt.Sprintf("%0*d", len(strconv.Itoa(max(n-1, 0))), i)
	if strings.Contains(out, shardPlaceholder) {
		return strings.ReplaceAll(out, shardPlaceholder, idx)
	}
	if !fromEnv || n <= 1 {
		return out
	}
	ext := filepath.Ext(out)
	if strings.Contains(ext, "/") {
		ext = ""
	}
	return strings.TrimSuffix(out, ext) + ".shard-" + idx + ext
}

// parseStartAt reads --start-at: an RFC 3339 instant, or +DURATION from
// now; at most replay.MaxStartAhead ahead, and (so that how long ago it
// passed can be said exactly) at most that long ago.
func parseStartAt(s string, now time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d > 0 {
			if d > replay.MaxStartAhead {
				return time.Time{}, startAtFar(s, "ahead")
			}
			return now.Add(d), nil
		}
	} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		// Compared, not subtracted: t - now overflows (saturates) for
		// instants centuries away.
		switch {
		case t.After(now.Add(replay.MaxStartAhead)):
			return time.Time{}, startAtFar(s, "ahead")
		case t.Before(now.Add(-replay.MaxStartAhead)):
			return time.Time{}, startAtFar(s, "in the past")
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--start-at %q: expected an RFC 3339 instant such as 2026-12-01T12:00:00Z (date -u -d '+3 min' +%%Y-%%m-%%dT%%H:%%M:%%SZ) or +DURATION from now such as +30s", s)
}

func startAtFar(s, where string) error {
	return fmt.Errorf("--start-at %s is more than %v %s: expected an instant within %v of now, the same for every shard, such as +3m or date -u -d '+3 min' +%%Y-%%m-%%dT%%H:%%M:%%SZ",
		s, replay.MaxStartAhead, where, replay.MaxStartAhead)
}

// startAtErr names --start-at in a replay.StartError.
func startAtErr(flag string, err error) error {
	var se *replay.StartError
	if errors.As(err, &se) {
		return fmt.Errorf("--start-at %s passed %v ago: every shard must be ready (targets up, probe done) before it; compute it once, far enough ahead for the slowest shard", flag, se.Late.Round(time.Millisecond))
	}
	return err
}

// fetchTrace downloads a trace URL into the output's directory (created if
// missing), with its media file when it carries real media items (from
// --media-file when that is a URL, else beside the trace's URL), and
// points c at the copy, recording the URL redacted; remove deletes the
// copies. SIGINT/SIGTERM abort the download.
func fetchTrace(c *replay.Config, out string, d distOpts) (remove func(), err error) {
	dir := filepath.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, badInput(fmt.Errorf("-o %s: creating its directory: %w", out, err))
	}
	if !replay.IsURL(c.Trace) {
		if replay.IsURL(c.MediaFile) {
			return nil, badInput(fmt.Errorf("--media-file %s: a URL is downloaded only with a trace URL; give a local trace's media file as a path", replay.RedactURL(c.MediaFile)))
		}
		return func() {}, nil
	}
	opts := replay.FetchOptions{Dir: dir, MaxBytes: d.maxTraceBytes, NoMedia: c.MediaFile != ""}
	if replay.IsURL(c.MediaFile) {
		opts.MediaURL, opts.NoMedia, c.MediaFile = c.MediaFile, false, "" // downloaded beside the trace's copy
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	path, remove, err := replay.FetchTrace(ctx, c.Trace, opts)
	var fe *replay.FetchError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, interrupted(fmt.Errorf("before the run started: %w", err))
	case errors.As(err, &fe) && fe.Input:
		return nil, badInput(err)
	default:
		return nil, runFailed(err)
	}
	c.TraceSource, c.Trace = replay.RedactURL(c.Trace), path
	return remove, nil
}

// notStarted ends a run whose clock never started (the start instant had
// passed, a signal came during the wait, ...): its recording is discarded,
// so no empty recording appears and an older one is left alone.
func notStarted(rec *record.Recorder, ctx context.Context, d distOpts, runErr error) error {
	if err := rec.Discard(); err != nil {
		runErr = fmt.Errorf("%w (and %v)", runErr, err)
	}
	var se *replay.StartError
	switch {
	case errors.As(runErr, &se):
		return badInput(startAtErr(d.startAt, runErr))
	case ctx.Err() != nil:
		return interrupted(fmt.Errorf("before the run started: %v; nothing was sent or written", context.Cause(ctx)))
	}
	return runFailed(fmt.Errorf("before the run started (nothing was sent or written): %w", runErr))
}
