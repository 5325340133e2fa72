package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/trace"
)

// The media stages (images, video and audio in the traffic): how fast
// virtual media are made (media.BenchmarkMake), whether bodies of
// megabytes sent beside text streams delay those streams' stamps
// (calibrate.RunMedia), and whether a trace with two 1024x1024 images per
// request is dispatched as punctually as the same trace without them
// (replay against a mock child, sharing the cores, then pinned to CPUs of
// their own; dispatch lag from the recording's health). Run one alone:
// go run ./bench -only 'media make' -o /tmp/m.md.

// mediaMakeBench: images/s and MB/s of media.Make, one item at a time.
func mediaMakeBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Media materialization (media.BenchmarkMake: one goroutine, a new seed per item)"
	rows, cmd, err := goBench(ctx, e, "./internal/media/", "^BenchmarkMake$", "-benchtime", "10x", "-count", "3")
	if err != nil {
		return nil, err
	}
	var figs []figure
	for _, c := range []struct{ sub, name string }{
		{"png-1024x1024", "1024x1024 PNG image"}, {"jpeg-1024x1024", "1024x1024 JPEG image (quality 75)"},
		{"wav-10s", "10 s WAV audio clip (16 kHz mono)"}, {"mp4-512x512x16", "512x512 MP4 video of 16 frames (Motion JPEG)"},
	} {
		var items, mb, size []float64
		for _, r := range rows {
			if r.Name == "BenchmarkMake/"+c.sub {
				items, mb, size = append(items, r.Metrics["items/s"]), append(mb, r.Metrics["MB/s"]), append(size, r.Metrics["bytes/item"])
			}
		}
		if len(items) == 0 {
			continue
		}
		figs = append(figs, figure{Section: sec, Name: c.name,
			Value:   fmt.Sprintf("%.2f items/s, %.2f MB/s (%.2f MB an item)", median(items), median(mb), median(size)/1e6),
			Command: cmd,
			Note: fmt.Sprintf("medians of 3 runs of 10 items on one core; replay makes items on its look-ahead goroutines, ahead of the dispatcher; random pixels, the worst case for the encoders; load average %s",
				loadAvg())})
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("%s: no BenchmarkMake rows", cmd)
	}
	return figs, nil
}

// mediaStamps is the media step's size: 1,000 requests with 4 MB of
// images beside 100 text streams, calibrate.RunMedia's default, the mock
// checking the images by their headers (its default too).
var mediaStamps = calibrate.MediaConfig{Streams: 100, Requests: 1000, Bytes: 4 << 20, Duration: 2 * time.Minute}

// mediaStampsBench: the text streams' per-event stamp error alone and
// with the media requests beside them.
func mediaStampsBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Stamps of text streams beside requests with images (calibrate.RunMedia, mock in a child process)"
	c := mediaStamps
	c.MockCommand, c.Logf = []string{e.bin, "mock"}, func(f string, a ...any) { e.logf("  "+f, a...) }
	before := loadAvg()
	rep, err := calibrate.RunMedia(ctx, c)
	if err != nil {
		return nil, err
	}
	c = rep.Config
	cmd := "go run ./bench -only 'media stamps'   # " + fmt.Sprintf("tracekit calibrate --media-requests %d --media-bytes %dKiB: %d text streams at %g events/s for %v, then the same beside %d requests of one %dx%d PNG (%.1f MB)",
		c.Requests, c.Bytes>>10, c.Streams, c.EventsPerS, c.Duration, c.Requests, rep.ImageSide, rep.ImageSide, float64(rep.ImageBytes)/1e6)
	note := fmt.Sprintf("offset %.3f ms (the probe's median); the mock checks each image by its %s; load average %s before, %s after", float64(rep.OffsetNs)/1e6, c.MediaCheck, before, loadAvg())
	run := func(r calibrate.MediaRun) string {
		return fmt.Sprintf("error p50 %.3f ms, p99 %.3f ms, max %.3f ms; TTFT inflation p50 %.3f ms; %d/%d events matched, %d failed; dispatch lag p99 %.1f us; client %.2f core",
			float64(r.ErrP50Ns)/1e6, float64(r.ErrP99Ns)/1e6, float64(r.ErrMaxNs)/1e6, float64(r.TTFTInflP50Ns)/1e6, r.Matched, r.EventsServer, r.Errors,
			float64(r.LagP99Ns)/1e3, r.ClientCores)
	}
	a, m := rep.Alone, rep.WithMedia
	withMedia := figure{Section: sec, Name: fmt.Sprintf("%d text streams beside %d requests of a %.1f MB image", c.Streams, c.Requests, float64(rep.ImageBytes)/1e6),
		Value: run(m) + fmt.Sprintf("; media: %d sent, %d failed, %.2f GB of bodies, send time p50 %.2f ms, p99 %.2f ms, max %.2f ms",
			m.MediaSent, m.MediaErrors, float64(m.MediaBodyBytes)/1e9, float64(m.SendP50Ns)/1e6, float64(m.SendP99Ns)/1e6, float64(m.SendMaxNs)/1e6),
		Goal: "per-event error p99 unchanged by the media (<= 1.5x + 0.2 ms of the streams alone)", Command: cmd, Note: note}
	withMedia.Verdict = atMost(float64(m.ErrP99Ns)/1e6, 1.5*float64(a.ErrP99Ns)/1e6+0.2, ms) // rep.Unchanged's bound
	if f := rep.Failed(); f != "" {
		withMedia.Verdict += "; **" + f + "**"
	}
	return []figure{
		{Section: sec, Name: fmt.Sprintf("%d text streams alone", c.Streams), Value: run(a), Command: cmd, Note: note},
		withMedia,
	}, nil
}

// mediaLagRounds is how many (text, images) pairs mediaDispatchBench
// runs, interleaved.
const mediaLagRounds = 2

// mediaLagRequests and mediaLagRate shape the dispatch-lag trace: long
// enough that nearly all of its images are made while it runs (the
// look-ahead holds 64 MiB of made media, a few dozen requests' worth,
// before the clock starts), at a rate this 2-core machine makes them at
// beside the mock (8 images a second).
const (
	mediaLagRequests = 360
	mediaLagRate     = 4
)

// mediaSynthArgs is the dispatch-lag trace: one-turn requests at
// mediaLagRate per second (Poisson), with or without two 1024x1024 JPEG
// images each.
func mediaSynthArgs(out string, images bool) []string {
	a := []string{"synth", "--conversations", fmt.Sprint(mediaLagRequests), "--turns", "1", "--input-tokens", "64", "--output-tokens", "16",
		"--rate", fmt.Sprint(mediaLagRate), "--seed", "5", "-o", out}
	if images {
		a = append(a, "--images", "2", "--image-size", "1024x1024")
	}
	return a
}

// mediaMockArgs is the mock of the dispatch-lag stage: it checks images by
// their headers alone (--media-check header), so that its decoding of two
// 1024x1024 JPEGs a request (tens of milliseconds of CPU each) does not
// take the client's cores and show as the client's lag.
var mediaMockArgs = append(slices.Clone(deadlockMockArgs), "--media-check", "header")

// mediaPinnedRounds is how many (text, images) pairs the pinned arm of
// mediaDispatchBench runs, interleaved.
const mediaPinnedRounds = 1

// lagRun is one replay's dispatch lag (us) and the mock's CPU in it (s).
type lagRun struct{ p50, p99, max, mockCPU float64 }

// mediaLagRun replays tr against a fresh mock child and returns the
// recording's dispatch lag; pinned puts the mock on CPU 1 and replay on
// CPU 0 (taskset). It also returns replay's arguments after its binary.
func mediaLagRun(ctx context.Context, e *env, tr, rec string, pinned bool) (lagRun, []string, error) {
	mockBin, mockArgs := e.bin, mediaMockArgs
	if pinned {
		mockBin, mockArgs = "taskset", append([]string{"-c", "1", e.bin}, mediaMockArgs...)
	}
	url, pid, stop, err := startMockPID(ctx, mockBin, mockArgs)
	if err != nil {
		return lagRun{}, nil, err
	}
	rargs := []string{"replay", tr, "--target", url, "--ignore-eos", "--continuous-usage", "off", "--model", "tracekit-mock",
		"--no-analyze", "--progress", "none", "-o", rec}
	cmd := exec.CommandContext(ctx, e.bin, rargs...)
	if pinned {
		cmd = exec.CommandContext(ctx, "taskset", append([]string{"-c", "0", e.bin}, rargs...)...)
	}
	cpu0 := cpuSeconds(pid)
	out, err := cmd.CombinedOutput()
	mockCPU := cpuSeconds(pid) - cpu0
	stop()
	if err != nil {
		return lagRun{}, nil, fmt.Errorf("replay: %w: %s", err, firstLine(out))
	}
	recs, meta, err := trace.ReadRecords(rec)
	os.Remove(rec)
	if err != nil {
		return lagRun{}, nil, err
	}
	h := meta.Health
	if h == nil {
		return lagRun{}, nil, fmt.Errorf("%s has no health figures", rec)
	}
	for _, r := range recs {
		if r.ErrorKind != "" {
			return lagRun{}, nil, fmt.Errorf("%s: request %s failed: %s %s", tr, r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
	}
	return lagRun{float64(h.DispatchLagP50Ns) / 1e3, float64(h.DispatchLagP99Ns) / 1e3, float64(h.DispatchLagMaxNs) / 1e3, mockCPU}, rargs, nil
}

// mediaDispatchBench: dispatch lag of the trace with images against the
// same trace without them (the recordings' health: intended send to the
// dispatcher's release), replay and the mock sharing the machine's cores;
// then, where there are two CPUs and taskset, with replay pinned to one
// CPU and the mock to another: a client of one core, where the media
// workers and the dispatcher share it.
func mediaDispatchBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Dispatch lag with images (replay against a mock child)"
	modes := []string{"text", "images"}
	traces := map[string]string{}
	for _, mode := range modes {
		tr := filepath.Join(e.work, "media-lag-"+mode+".parquet")
		if out, err := exec.CommandContext(ctx, e.bin, mediaSynthArgs(tr, mode == "images")...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("synth: %w: %s", err, firstLine(out))
		}
		traces[mode] = tr
	}
	_, tasksetErr := exec.LookPath("taskset")
	arms := []bool{false}
	if tasksetErr == nil && runtime.NumCPU() >= 2 {
		arms = append(arms, true)
	}
	note := "the images are made by replay's look-ahead, off the dispatcher, on threads at the lowest priority with Ps of their own that sleep while a request is due: the first requests' (up to 64 + 32 MiB) before the clock starts, the rest while the run goes on; " +
		"the mock checks each image by its header (--media-check header): decoding them in full, as a server does, takes tens of milliseconds of CPU an image on the cores replay shares with it, which would be measured as replay's lag"
	var figs []figure
	for _, pinned := range arms {
		rounds := mediaLagRounds
		if pinned {
			rounds = mediaPinnedRounds
		}
		runs := map[string][]lagRun{}
		var rargs []string
		load0 := loadAvg()
		for round := range rounds {
			for _, mode := range modes {
				e.logf("  replaying %s (round %d of %d%s)", mode, round+1, rounds, map[bool]string{true: ", pinned"}[pinned])
				run, a, err := mediaLagRun(ctx, e, traces[mode], filepath.Join(e.work, "media-lag-"+mode+"-rec.parquet"), pinned)
				if err != nil {
					return nil, err
				}
				runs[mode], rargs = append(runs[mode], run), a
			}
		}
		load1 := loadAvg()
		p99 := map[string]float64{}
		for _, mode := range modes {
			col := func(f func(lagRun) float64) []float64 {
				var v []float64
				for _, r := range runs[mode] {
					v = append(v, f(r))
				}
				return v
			}
			p99s := col(func(r lagRun) float64 { return r.p99 })
			p99[mode] = median(p99s)
			mock, client := "bin/tracekit ", "bin/tracekit "
			if pinned {
				mock, client = "taskset -c 1 bin/tracekit ", "taskset -c 0 bin/tracekit "
			}
			cmd := "bin/tracekit " + shellJoin(mediaSynthArgs("t.parquet", mode == "images")) + " && " + mock + shellJoin(mediaMockArgs) +
				" & " + client + shellJoin(append([]string{"replay", "t.parquet", "--target", "http://127.0.0.1:PORT"}, rargs[4:len(rargs)-2]...))
			strs := make([]string, len(p99s))
			for i, v := range p99s {
				strs[i] = fmt.Sprintf("%.0f", v)
			}
			name := fmt.Sprintf("%d requests at %d/s, text only", mediaLagRequests, mediaLagRate)
			if mode == "images" {
				name = "the same with two 1024x1024 JPEG images each (virtual, made by replay's look-ahead)"
			}
			if pinned {
				name = "replay pinned to one CPU, the mock to another: " + name
			}
			value := fmt.Sprintf("p50 %.1f us, p99 %.1f us, max %.1f us (run p99s %s us; the mock's CPU %.1f s a run; load average %s -> %s)",
				median(col(func(r lagRun) float64 { return r.p50 })), p99[mode], median(col(func(r lagRun) float64 { return r.max })),
				strings.Join(strs, ", "), median(col(func(r lagRun) float64 { return r.mockCPU })), load0, load1)
			if rounds > 1 {
				name += fmt.Sprintf(": dispatch lag, median of %d runs interleaved", rounds)
			} else {
				name += ": dispatch lag, one run"
				value = strings.Replace(value, "run p99s", "run p99", 1)
			}
			figs = append(figs, figure{Section: sec, Name: name, Value: value, Command: cmd, Note: note})
		}
		f := &figs[len(figs)-1]
		f.Goal = "dispatch lag p99 unchanged (<= 1.5x + 50 us of the text-only runs')"
		f.Verdict = atMost(p99["images"], 1.5*p99["text"]+50, us)
	}
	return figs, nil
}
