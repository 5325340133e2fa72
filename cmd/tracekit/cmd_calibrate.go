package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// newCalibrateCmd builds the calibrate command.
func newCalibrateCmd() *cobra.Command {
	var (
		c                   calibrate.Config
		jsonOut, cpuProfile string
		m                   calibrate.MediaConfig
		mediaBytes          sizeValue
	)
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure how faithfully this machine records: replay a load ladder against a mock and compare with its ground truth",
		Long: `calibrate replays a ladder of loads against a mock, joins each recording with
the mock's ground-truth log (by X-Request-Id and event index) and prints per
step: dispatch lag p50/p99/max, event timestamp error p50/p99/max (client stamp
minus the mock's write time, minus the constant loopback offset: the median
difference of a quiet probe step run first), client CPU and RSS, and
matched/unmatched events. It ends with the largest load whose p99 error stays
under --max-error: "this machine can drive N streams / M events/s faithfully".

A second table gives each stream step's error in its steady state: only the
events the mock wrote while every stream of the step was open (after the last
stream's first event, before the first stream's last event; up to one stream
in a hundred at either end left out as a straggler), so the
connection ramp and the tail are left out; with the window's start, length and
event count. It is shown next to the whole-step figures; pass/fail and the
verdict stay on the whole step.

Variations measure the tails: --bursts N runs N streams of identical length
started together, then N more started as the first wave ends (the wave
boundary: N streams end while N requests start); --burn N runs a stream step
with a CPU burner inside the client (--burners goroutines spinning in 100us
slices between yields); --scrape-pair N runs a stream step without and then
with scraping the mock's /metrics every --scrape-interval. --stamp
goroutine,kernel,kernel-offset runs every step once per replay stamp mode,
back to back, each against its own probe's offset. --endpoint
chat,completions,responses,messages,embeddings,rerank,score runs every step,
the probe included, once per API listed (default chat), each against its own
probe's offset, the endpoint named in every row: streaming APIs join event i
to event i (the events with output: Responses' and Messages' opening,
closing and ping events count on neither side); embeddings, rerank and score
answer one body, joined as such ("body" in the join column): the client's
stamp of the body's completion against the mock's write of it. Every step
also prints its
TTFT inflation p50: the client's stamp of each request's first event minus
the mock's write of it, no offset removed.

Stream steps (--streams, --events-per-s; default 4 events/s per stream) run N
streams of about --duration each, started over min(1s, duration/4). Rate steps
(--rates) send short requests (4 tokens, 5 ms apart) at R requests/s for
--duration. The mock runs as a 'tracekit mock' child process by default
(--mock process), so its goroutines and GC stay out of the client's figures;
--mock inprocess runs it inside this process. Client and mock still share
this machine's cores. --target uses a 'tracekit mock --emit-log FILE' running
elsewhere: give that FILE as --mock-log; calibrate waits for it to be complete
(stop that mock) and joins then; stream rates follow that mock's --decode-base
(--target-itl).

--media-requests N runs the media step instead of the ladder: do request
bodies of megabytes, sent beside text streams, delay the stamps of those
streams' events? --media-streams text streams (default 100, 10 events/s
each) run for --duration (default 2m here) twice against a fresh mock: alone,
then beside N requests of one PNG of --media-bytes (default 4MiB) each, spread
over the streams' steady part. Each request base64-encodes and writes its own
body. It prints both runs' per-event error and the media requests' body
bytes and send times (write start to last byte), and exits 1 if a request
failed or an event was not matched. The mock checks the images by their
header (--media-check header): decoding them would take the CPU the client
shares with it.`,
		Example: `  tracekit calibrate
  tracekit calibrate --streams 1000,5000,10000 --events-per-s 4000,20000,40000 --rates 500,2000,5000 --json cal.json
  tracekit calibrate --streams 100,500 --duration 3s --mock inprocess --max-error 500us
  tracekit calibrate --streams 200 --endpoint chat,responses,messages,embeddings
  tracekit calibrate --streams 10 --bursts 500,1000 --burn 500 --scrape-pair 1000 --stamp goroutine,kernel,kernel-offset
  tracekit mock --listen 127.0.0.1:8000 --emit-log truth.parquet &   # then:
  tracekit calibrate --target http://127.0.0.1:8000 --mock-log truth.parquet --streams 200
  tracekit calibrate --media-requests 1000 --media-bytes 4MiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if m.Requests != 0 {
				m.Bytes = int(min(int64(mediaBytes), 1<<40))
				return runCalibrateMedia(cmd, c, m, jsonOut)
			}
			for _, name := range []string{"media-bytes", "media-streams", "media-check"} {
				if cmd.Flags().Changed(name) {
					return badInput(fmt.Errorf("--%s is for the media step: give --media-requests too", name))
				}
			}
			if c.Target == "" && c.Mode != calibrate.ModeInProcess {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding the tracekit executable for the mock child (or use --mock inprocess): %w", err)
				}
				c.MockCommand = []string{exe, "mock"}
			}
			if err := calibrate.Validate(c); err != nil {
				return badInput(err)
			}
			c.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "calibrate: "+format+"\n", args...) }
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				done, err := startCPUProfile(cpuProfile)
				if err != nil {
					return badInput(err)
				}
				defer done()
			}
			rep, err := calibrate.Run(ctx, c)
			if err != nil && ctx.Err() != nil {
				err = interrupted(err)
			}
			if rep != nil {
				if werr := rep.WriteText(cmd.OutOrStdout()); werr != nil {
					return werr
				}
				if jsonOut != "" {
					if werr := writeCalibrateJSON(jsonOut, rep); werr != nil {
						return werr
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	c.Streams = []int{1000, 5000, 10000}
	f.Var(intList{&c.Streams}, "streams", "stream steps: concurrent streams (empty: none)")
	f.Float64SliceVar(&c.EventsPerS, "events-per-s", nil, "events/s of each stream step across its streams, one per --streams value or one for all (default 4 per stream)")
	f.Float64SliceVar(&c.Rates, "rates", nil, "rate steps: requests/s of short requests, e.g. 500,2000,5000")
	f.DurationVar(&c.Duration, "duration", 5*time.Second, "how long each step's streams last")
	f.DurationVar(&c.MaxError, "max-error", time.Millisecond, "p99 event timestamp error a step may have to count as faithful")
	f.StringVar(&c.Mode, "mock", calibrate.ModeProcess, "where the mock runs: process (a tracekit mock child) or inprocess")
	f.StringVar(&c.Target, "target", "", "base URL of a tracekit mock already running (started with --emit-log)")
	f.StringVar(&c.MockLog, "mock-log", "", "with --target: that mock's --emit-log file, read once it is complete")
	f.DurationVar(&c.LogWait, "log-wait", 2*time.Minute, "with --target: how long to wait for --mock-log to be complete")
	f.DurationVar(&c.TargetITL, "target-itl", 15*time.Millisecond, "with --target: that mock's --decode-base, to size the streams")
	f.IntSliceVar(&c.Bursts, "bursts", nil, "burst steps: N streams started together, then N more as they end (the wave boundary)")
	f.DurationVar(&c.BurstITL, "burst-itl", calibrate.DefaultBurstITL, "inter-event time of a burst step's streams")
	f.IntSliceVar(&c.Burn, "burn", nil, "stream steps run with a CPU burner beside the client (busy goroutines)")
	f.IntVar(&c.Burners, "burners", 0, "goroutines of the CPU burner (default GOMAXPROCS)")
	f.IntSliceVar(&c.Saturated, "saturated", nil, "saturated steps: N streams at one event every 20 ms each (1,000 streams are 50,000 events/s), to be run with --client-cpus")
	f.DurationVar(&c.Prefill, "prefill", 0, "the mock's time to each stream's first event (default: the step's inter-event time), to measure TTFT inflation with a short prefill")
	f.IntVar(&c.ClientCPUs, "client-cpus", 0, "pin the client to this many CPUs and the mock to the others, as taskset would (GOMAXPROCS to match); 0: no pinning")
	f.IntSliceVar(&c.ScrapePairs, "scrape-pair", nil, "stream steps run twice: without and with scraping the mock's /metrics")
	f.DurationVar(&c.ScrapeInterval, "scrape-interval", time.Second, "scrape interval of --scrape-pair's second step")
	f.IntSliceVar(&c.LivePairs, "live-pair", nil, "stream steps run twice into a recording file: without and with the live view of --progress dashboard fed (its dashboard drawing to nowhere)")
	f.StringSliceVar(&c.Stamps, "stamp", nil, "replay stamp modes to run every step in, side by side (goroutine,kernel,kernel-offset); default replay's default only")
	f.StringSliceVar(&c.Endpoints, "endpoint", nil, "APIs to run every step on, side by side ("+strings.Join(trace.Endpoints, ",")+"); default chat only")
	f.StringVar(&c.Dir, "keep", "", "keep each step's trace, recording and mock log in this directory")
	f.StringVar(&jsonOut, "json", "", "also write the report as JSON to this file")
	f.IntVar(&m.Requests, "media-requests", 0, "run the media step instead of the ladder: the text streams alone, then beside this many requests with an image each")
	f.Var(&mediaBytes, "media-bytes", "with --media-requests: the image's size (bytes, or e.g. 512KiB, 4MiB; default 4MiB)")
	f.IntVar(&m.Streams, "media-streams", 100, "with --media-requests: text streams, at 10 events/s each")
	f.StringVar(&m.MediaCheck, "media-check", mock.MediaCheckHeader, "with --media-requests: how the mock checks each image: header (format and size) or full (decode the pixels)")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the client (this process) over the whole calibration to this file (go tool pprof)")
	return cmd
}

func writeCalibrateJSON(path string, rep *calibrate.Report) error {
	return writeFile(path, rep.WriteJSON)
}

// intList is a comma-separated list of counts whose empty value is the
// empty list ("--streams ”": no stream steps), where pflag's own int
// slice refuses "".
type intList struct{ v *[]int }

func (l intList) String() string {
	s := make([]string, len(*l.v))
	for i, n := range *l.v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l intList) Set(s string) error {
	*l.v = (*l.v)[:0]
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", f)
		}
		*l.v = append(*l.v, n)
	}
	return nil
}

func (l intList) Type() string { return "ints" }

// startCPUProfile writes a CPU profile of this process to path until done
// is called; an existing file is not replaced.
func startCPUProfile(path string) (done func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runCalibrateMedia runs calibrate's media step (--media-requests).
func runCalibrateMedia(cmd *cobra.Command, c calibrate.Config, m calibrate.MediaConfig, jsonOut string) error {
	switch {
	case m.Requests < 0:
		return badInput(fmt.Errorf("--media-requests %d: expected a positive count", m.Requests))
	case c.Target != "":
		return badInput(errors.New("--media-requests runs its own mock: it cannot use --target"))
	case m.Streams < 1:
		return badInput(fmt.Errorf("--media-streams %d: expected at least 1", m.Streams))
	case cmd.Flags().Changed("media-bytes") && m.Bytes == 0:
		return badInput(errors.New("--media-bytes 0: expected from 1KiB to 24MiB"))
	}
	if cmd.Flags().Changed("duration") {
		m.Duration = c.Duration
	}
	if c.Mode != calibrate.ModeInProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the tracekit executable for the mock child (or use --mock inprocess): %w", err)
		}
		m.MockCommand = []string{exe, "mock"}
	}
	m.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "calibrate: "+format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := calibrate.RunMedia(ctx, m)
	if err != nil {
		if fe := (*fielderr.Error)(nil); errors.As(err, &fe) {
			return badInput(err) // errorText names the flag
		}
		if ctx.Err() != nil {
			return interrupted(err)
		}
		return err
	}
	if err := rep.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if jsonOut != "" {
		if err := writeFile(jsonOut, rep.WriteJSON); err != nil {
			return err
		}
	}
	if f := rep.Failed(); f != "" {
		return runFailed(fmt.Errorf("media step: %s", f))
	}
	return nil
}
