package calibrate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// The media step: do bodies of megabytes, sent beside text streams, delay
// the stamps of those streams' events? A text stream step runs twice, back
// to back against a fresh mock each: alone, then with Requests requests
// of one image of Bytes each sent beside it, spread evenly over the
// streams' steady part (after their ramp, before their end). Only the text
// streams are joined with the mock's log; their per-event error (client
// stamp - server write, minus the probe's offset) alone and with the media
// is the comparison. The media requests' own figures (sent, failed, the
// body's send time write_start -> sent) say how much was really sent.
//
// The image is one PNG of random pixels made once (media.Make) and shared
// by every media request (trace.Media.Data set ahead, so replay's
// look-ahead has nothing to make): what is measured is the sending, not
// the making. Each request still base64-encodes and writes its own body.

// MediaConfig sizes a media comparison; zero fields take their defaults.
type MediaConfig struct {
	Streams    int     // text streams; default 100
	EventsPerS float64 // across the text streams; default 10 per stream
	// Duration is each text stream's; default 2 min, over which 1,000
	// requests of 4 MiB are about 50 MB/s of bodies. In 30 s, on a 2-core
	// machine shared with the mock, the sends fell seconds behind.
	Duration time.Duration
	Requests int // media requests beside them; default 1000
	Bytes    int // of the image each media request carries; default 4 MiB
	// MediaCheck is how the mock checks each image (mock.Config.MediaCheck):
	// mock.MediaCheckHeader by default, since decoding them would take
	// CPU from the cores the client shares with the mock (and be measured
	// as the client's error), and a thousand decoded images queued behind
	// two decoding slots its memory (past 16 GB on a 23 GB machine).
	MediaCheck string
	// MockCommand starts a `tracekit mock` child per run, as
	// Config.MockCommand; nil runs the mock in this process.
	MockCommand []string
	// Logf receives progress lines; may be nil.
	Logf func(format string, args ...any)
}

// MediaReport is a media comparison's outcome: the text streams' error
// alone and with the media requests beside them, against one offset (the
// probe's median difference).
type MediaReport struct {
	Config MediaConfig `json:"-"`
	// ImageBytes is the size of the PNG each media request carried.
	ImageBytes int `json:"image_bytes"`
	// ImageSide is the PNG's width and height in pixels.
	ImageSide int `json:"image_side"`
	// OffsetNs is the probe's median difference (client stamp minus the
	// mock's write), removed from every error.
	OffsetNs int64 `json:"offset_ns"`
	// Alone is the text streams' run without the media requests.
	Alone MediaRun `json:"alone"`
	// WithMedia is the same run with the media requests beside it.
	WithMedia MediaRun `json:"with_media"`
}

// MediaRun is one run of the text streams.
type MediaRun struct {
	// Matched is the text events joined with the mock's log.
	Matched int `json:"matched"`
	// EventsServer is the text events the mock wrote.
	EventsServer int `json:"events_server"`
	// Errors is the text requests that failed.
	Errors int `json:"errors"`
	// ErrP50Ns is the text events' per-event error p50 (client stamp minus
	// the mock's write, the offset removed).
	ErrP50Ns int64 `json:"error_p50_ns"`
	// ErrP99Ns is the text events' per-event error p99.
	ErrP99Ns int64 `json:"error_p99_ns"`
	// ErrMaxNs is the text events' largest per-event error.
	ErrMaxNs int64 `json:"error_max_ns"`
	// TTFTInflP50Ns is the first text events' error p50: TTFT inflation.
	TTFTInflP50Ns int64 `json:"ttft_inflation_p50_ns"`
	// LagP99Ns is the run's dispatch lag p99.
	LagP99Ns int64 `json:"dispatch_lag_p99_ns"`
	// MediaSent is the media requests sent.
	MediaSent int `json:"media_sent"`
	// MediaErrors is the media requests that failed.
	MediaErrors int `json:"media_errors"`
	// MediaBodyBytes is the bytes of the media requests' bodies.
	MediaBodyBytes int64 `json:"media_body_bytes"`
	// SendP50Ns is the media bodies' send time p50 (sent_ns -
	// write_start_ns).
	SendP50Ns int64 `json:"send_p50_ns"`
	// SendP99Ns is the media bodies' send time p99.
	SendP99Ns int64 `json:"send_p99_ns"`
	// SendMaxNs is the media bodies' longest send time.
	SendMaxNs int64 `json:"send_max_ns"`
	// ClientCores is the client's CPU over the run's wall time.
	ClientCores float64 `json:"client_cores"`
	// WallSeconds is the run's wall time.
	WallSeconds float64 `json:"wall_seconds"`
}

func (c MediaConfig) withDefaults() (MediaConfig, error) {
	if c.Streams == 0 {
		c.Streams = 100
	}
	if c.EventsPerS == 0 {
		c.EventsPerS = 10 * float64(c.Streams)
	}
	if c.Duration == 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Requests == 0 {
		c.Requests = 1000
	}
	if c.Bytes == 0 {
		c.Bytes = 4 << 20
	}
	if c.MediaCheck == "" {
		c.MediaCheck = mock.MediaCheckHeader
	}
	switch {
	case c.Streams < 1:
		return c, mediaFieldErr("Streams", "%d must be >= 1", c.Streams)
	case c.EventsPerS <= 0 || math.IsNaN(c.EventsPerS):
		return c, mediaFieldErr("EventsPerS", "%v must be > 0", c.EventsPerS)
	case c.Duration < time.Second:
		return c, mediaFieldErr("Duration", "%v must be >= 1s", c.Duration)
	case c.Requests < 1:
		return c, mediaFieldErr("Requests", "%d must be >= 1", c.Requests)
	case c.Bytes < 1024 || c.Bytes > 24<<20:
		return c, mediaFieldErr("Bytes", "%d must be from 1 KiB to 24 MiB (the mock takes bodies up to 32 MiB)", c.Bytes)
	case c.MediaCheck != mock.MediaCheckHeader && c.MediaCheck != mock.MediaCheckFull:
		return c, mediaFieldErr("MediaCheck", "%q: expected %s or %s", c.MediaCheck, mock.MediaCheckHeader, mock.MediaCheckFull)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c, nil
}

// mediaFieldErr is a *fielderr.Error about the MediaConfig field field.
func mediaFieldErr(field, format string, args ...any) error {
	return fielderr.Errorf("calibrate.MediaConfig", field, format, args...)
}

// RunMedia runs the probe, then the text streams alone and with the media
// requests beside them.
func RunMedia(ctx context.Context, c MediaConfig) (*MediaReport, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tracekit-calibrate-media-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(dir)
	// A PNG of random RGB pixels takes about 3 bytes a pixel.
	side := int(math.Sqrt(float64(c.Bytes) / 3))
	img, err := media.Make(nil, &trace.Media{Kind: trace.MediaImage, Format: "png", Width: int32(side), Height: int32(side), Seed: 1})
	if err != nil {
		return nil, fmt.Errorf("making the image: %w", err)
	}
	rep := &MediaReport{Config: c, ImageBytes: len(img), ImageSide: side}

	probe := Step{Kind: KindProbe, Streams: ProbeStreams, EventsPerS: ProbeEventsPerS}
	c.Logf("media step: probe (%d streams) ...", probe.Streams)
	_, diffs, err := mediaRun(ctx, c, dir, 0, probe, nil)
	if err != nil {
		return nil, err
	}
	rep.OffsetNs = quantile(diffs, 0.5)
	text := Step{Kind: KindStreams, Streams: c.Streams, EventsPerS: c.EventsPerS}
	item := &trace.Media{Kind: trace.MediaImage, Format: "png", Width: int32(side), Height: int32(side), Seed: 1, Data: string(img)}
	for i, run := range []struct {
		dst  *MediaRun
		item *trace.Media
	}{{&rep.Alone, nil}, {&rep.WithMedia, item}} {
		what := "alone"
		if run.item != nil {
			what = fmt.Sprintf("beside %d requests of a %.1f MB image", c.Requests, float64(len(img))/1e6)
		}
		c.Logf("media step: %d text streams %s ...", c.Streams, what)
		r, diffs, err := mediaRun(ctx, c, dir, i+1, text, run.item)
		if err != nil {
			return nil, err
		}
		r.ErrP50Ns, r.ErrP99Ns, r.ErrMaxNs = quantile(diffs, 0.5)-rep.OffsetNs, quantile(diffs, 0.99)-rep.OffsetNs, quantile(diffs, 1)-rep.OffsetNs
		r.TTFTInflP50Ns -= rep.OffsetNs
		*run.dst = r
	}
	return rep, nil
}

// mediaRun runs step's text streams against a fresh mock, with c.Requests
// media requests carrying image beside them when image is not nil, and
// returns the figures and the text events' raw differences (sorted).
func mediaRun(ctx context.Context, c MediaConfig, dir string, idx int, s Step, image *trace.Media) (MediaRun, []int64, error) {
	p := size(s, c.Duration, s.ITL(), idx)
	p.prefix = fmt.Sprintf("calmedia%02d-", idx)
	turns := p.turns()
	mprefix := fmt.Sprintf("calmediaimg%02d-", idx)
	cfg := p.mockConfig()
	cfg.MediaCheck = c.MediaCheck
	if image != nil {
		// after the streams' ramp, before their end
		from, to := min(maxRamp, c.Duration/4), c.Duration-c.Duration/8
		step := (to - from) / time.Duration(c.Requests)
		for i := range c.Requests {
			at := int64(from + time.Duration(i)*step)
			id := mprefix + strconv.Itoa(i)
			turns = append(turns, trace.Turn{ConversationID: id, StartOffsetNs: at, ArrivalOffsetNs: at,
				Messages: []trace.Message{{Role: "user", Content: "calibration media " + id, Tokens: 4,
					Media: []trace.Media{*image}}},
				InputTokens: 4, OutputTokens: RateTokens})
		}
		slices.SortStableFunc(turns, func(a, b trace.Turn) int { return cmp.Compare(a.StartOffsetNs, b.StartOffsetNs) })
		cfg.Latency.MaxNumSeqs += c.Requests // nobody queues
	}
	var m runningMock
	var err error
	if c.MockCommand == nil {
		m, err = startInProcess(cfg)
	} else {
		m, err = startChild(c.MockCommand, nil, cfg, filepath.Join(dir, fmt.Sprintf("%02d.mock.parquet", idx)))
	}
	if err != nil {
		return MediaRun{}, nil, err
	}
	mem := &record.Memory{}
	began := time.Now()
	h, canceled, err := replayMedia(ctx, p, turns, m.URL(), cfg.Model, mem)
	wall := time.Since(began)
	log, _, _, stopErr := m.Stop()
	if err != nil {
		return MediaRun{}, nil, err
	}
	if stopErr != nil {
		return MediaRun{}, nil, stopErr
	}
	if canceled != "" {
		return MediaRun{}, nil, fmt.Errorf("media step %d: the replay was cut short: %s", idx, canceled)
	}
	var text []trace.Record
	var sends []int64
	r := MediaRun{LagP99Ns: h.DispatchLagP99Ns, WallSeconds: wall.Seconds()}
	if h.WallSeconds > 0 {
		r.ClientCores = h.CPUSeconds / h.WallSeconds
	}
	for _, rec := range mem.Records() {
		if !strings.HasPrefix(rec.ConversationID, mprefix) {
			text = append(text, rec)
			continue
		}
		r.MediaSent++
		r.MediaBodyBytes += rec.RequestBytes
		if rec.ErrorKind != trace.ErrNone {
			r.MediaErrors++
		}
		if rec.WriteStartNs > 0 && rec.SentNs >= rec.WriteStartNs {
			sends = append(sends, rec.SentNs-rec.WriteStartNs)
		}
	}
	slices.Sort(sends)
	r.SendP50Ns, r.SendP99Ns, r.SendMaxNs = quantile(sends, 0.5), quantile(sends, 0.99), quantile(sends, 1)
	j := Join(text, mem.RunMeta().StartMonoNs, log, p.prefix) // the text streams' entries only
	r.Matched, r.EventsServer, r.Errors = j.Matched(), j.EventsServer, j.Errors
	r.TTFTInflP50Ns = quantile(j.FirstDiffs, 0.5)
	return r, j.Diffs, nil
}

// mediaTimeout bounds a media run past the text streams' span: the mock
// decodes every image before it answers, and on a small machine a
// thousand images of megabytes queue there for minutes.
const mediaTimeout = 8 * time.Minute

// replayMedia is replayInto with room for the media requests' answers:
// the run is bounded by the streams' span plus mediaTimeout.
func replayMedia(ctx context.Context, p plan, turns []trace.Turn, target, model string, mem *record.Memory) (trace.Health, string, error) {
	res, err := replay.Record(ctx, replay.Config{
		Targets: []string{target}, Model: model,
		IgnoreEOS: true, ContinuousUsage: "on",
		IdleTimeout: 2 * time.Minute, ReadyTimeout: 10 * time.Second,
		BenchmarkTimeout: p.span() + mediaTimeout, StampMode: p.step.Stamp,
		Command: "tracekit calibrate (media, " + p.step.Name() + ")",
	}, replay.NewMemorySource(traceMeta, turns), replay.Into(mem))
	var cfgErr *replay.ConfigError
	if errors.As(err, &cfgErr) {
		return trace.Health{}, "", fmt.Errorf("preparing the replay: %w", cfgErr.Err)
	}
	if err != nil {
		return trace.Health{}, "", fmt.Errorf("replaying the media step: %w", err)
	}
	if res == nil || res.Meta.Health == nil {
		return trace.Health{}, "", errors.New("the media step's replay did not start")
	}
	return *res.Meta.Health, res.Canceled, nil
}

// Unchanged reports whether the media left the text streams' per-event
// error as it was: p99 beside them at most 1.5 times the p99 alone plus
// 0.2 ms (the bound of BENCHMARKS.md's goal for this step).
func (rep *MediaReport) Unchanged() bool {
	return float64(rep.WithMedia.ErrP99Ns) <= 1.5*float64(rep.Alone.ErrP99Ns)+0.2e6
}

// Failed says what went wrong in either run (failed requests, text
// events not matched, media requests failed or not sent), "" if nothing:
// against a healthy mock all of it is a failure of the run.
func (rep *MediaReport) Failed() string {
	var bad []string
	for _, r := range []struct {
		name string
		run  MediaRun
	}{{"alone", rep.Alone}, {"beside the media", rep.WithMedia}} {
		if r.run.Errors > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d text requests failed", r.name, r.run.Errors))
		}
		if r.run.Matched != r.run.EventsServer {
			bad = append(bad, fmt.Sprintf("%s: %d of %d text events matched", r.name, r.run.Matched, r.run.EventsServer))
		}
	}
	if m := rep.WithMedia; m.MediaErrors > 0 || m.MediaSent != rep.Config.Requests {
		bad = append(bad, fmt.Sprintf("%d of %d media requests sent, %d failed", m.MediaSent, rep.Config.Requests, m.MediaErrors))
	}
	return strings.Join(bad, "; ")
}

// WriteText prints the comparison: the two runs side by side, the media
// requests' figures and the verdict.
func (rep *MediaReport) WriteText(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "tracekit calibrate: media step: %d text streams at %g events/s for %v, alone and beside %d requests of one %dx%d PNG (%s) each; the mock checks images by %s\n",
		c.Streams, c.EventsPerS, c.Duration, c.Requests, rep.ImageSide, rep.ImageSide, fmtBytes(int64(rep.ImageBytes)), c.MediaCheck)
	fmt.Fprintf(w, "offset removed: %s (the probe's median)\n\n", fmtNs(rep.OffsetNs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "text streams\terror p50\tp99\tmax\tttft infl p50\tlag p99\tmatched\tof\terrors\tclient cores\tmedia sent\tfailed\tbodies\tsend p50\tp99\tmax\t")
	for _, r := range []struct {
		name string
		run  MediaRun
	}{{"alone", rep.Alone}, {"beside the media", rep.WithMedia}} {
		m := r.run
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%d\t%d\t%s\t%s\t%s\t%s\t\n", r.name,
			fmtNs(m.ErrP50Ns), fmtNs(m.ErrP99Ns), fmtNs(m.ErrMaxNs), fmtNs(m.TTFTInflP50Ns), fmtNs(m.LagP99Ns),
			m.Matched, m.EventsServer, m.Errors, m.ClientCores, m.MediaSent, m.MediaErrors, fmtBytes(m.MediaBodyBytes),
			fmtNs(m.SendP50Ns), fmtNs(m.SendP99Ns), fmtNs(m.SendMaxNs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "unchanged by the media"
	if !rep.Unchanged() {
		verdict = "CHANGED by the media"
	}
	fmt.Fprintf(w, "\nper-event error p99 %s beside the media, %s alone: %s (the bound: 1.5x + 0.2 ms)\n",
		fmtNs(rep.WithMedia.ErrP99Ns), fmtNs(rep.Alone.ErrP99Ns), verdict)
	if f := rep.Failed(); f != "" {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	return nil
}

// fmtBytes is n in B, KB, MB or GB (powers of 1000).
func fmtBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// WriteJSON writes the report as indented JSON.
func (rep *MediaReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
