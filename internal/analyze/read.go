package analyze

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/tracekit/tracekit/trace"
)

// ErrBadInput is wrapped by every error about the input files (unreadable,
// not a recording, wrong version, empty, truncated, inconsistent rows), so
// the command can exit with the usage code.
var ErrBadInput = errors.New("bad input")

// readBatch is how many rows Files decodes at a time.
const readBatch = 1024

// Expand replaces each argument holding glob metacharacters by its sorted
// matches; a pattern with no match is an error.
func Expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w: %w", a, err, ErrBadInput)
		}
		switch {
		case len(m) > 0:
			out = append(out, m...)
		case hasMeta(a):
			return nil, fmt.Errorf("pattern %q matches no file: %w", a, ErrBadInput)
		default:
			out = append(out, a) // let Open report it
		}
	}
	return out, nil
}

func hasMeta(s string) bool {
	for _, c := range s {
		if c == '*' || c == '?' || c == '[' {
			return true
		}
	}
	return false
}

// Files analyzes the recordings at paths as one run: the shards of one
// distributed run are aligned on their RunMeta.StartWallNs (the earliest
// becomes time 0).
func Files(paths []string, opts Options) (*Summary, error) {
	if opts.Window.IsSteady() {
		return steadyPass(opts, func(o Options) (*Summary, error) { return files(paths, o, true) })
	}
	return files(paths, opts, true)
}

// files is Files; columns false forces the generic row reader (the
// reference the column reader is tested against).
func files(paths []string, opts Options, columns bool) (*Summary, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no recording given: %w", ErrBadInput)
	}
	ins := make([]input, 0, len(paths))
	defer func() {
		for _, in := range ins {
			in.close()
		}
	}()
	files := make([]FileInfo, len(paths))
	base := int64(0)
	for i, p := range paths {
		in, err := openInput(p, columns)
		if err != nil {
			return nil, fmt.Errorf("analyzing: %w: %w", err, ErrBadInput)
		}
		ins = append(ins, in)
		files[i] = FileInfo{Path: p, Rows: in.r.NumRows(), Meta: in.r.Meta}
		if w := in.r.Meta.StartWallNs; w != 0 && (base == 0 || w < base) {
			base = w
		}
	}
	if err := checkRuns(files); err != nil { // shards.go
		return nil, fmt.Errorf("analyzing: %w", err)
	}
	for i := range files {
		if w := files[i].Meta.StartWallNs; w != 0 {
			files[i].OffsetNs = w - base
		}
	}
	acc := newAccumulator(opts)
	events := 0
	for i, f := range files {
		acc.files = append(acc.files, fileDefaultsOf(f.Meta, ins[i].r.HasColumn("reasoning_tokens")))
		acc.expectRows += int(f.Rows)
		events += ins[i].events()
	}
	if events > 0 {
		acc.reserve(events)
	}
	var total int64
	for i, in := range ins {
		n, err := in.read(files[i], i, acc)
		if err != nil {
			return nil, err
		}
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: the recording holds no requests: %w", paths[0], ErrBadInput)
	}
	if err := acc.emptyWindow(); err != nil {
		return nil, err
	}
	s := acc.finish(files)
	s.StartWallNs = base
	s.shardClocks()
	if err := s.attachServer(); err != nil {
		return nil, err
	}
	return s, nil
}

// columns are the recording columns the metrics read (trace.ScanOptions).
var scanColumns = []string{"request_id", "conversation_id", "target", "error_kind", "error_message",
	"turn", "shard", "attempt", "status", "input_tokens", "prompt_tokens", "completion_tokens", "cached_tokens",
	"intended_ns", "slot_ns", "sent_ns", "headers_ns", "done_ns", "warmup", "event_gap_us", "event_tokens", "non_streaming",
	"parents", "after", "tool_calls", "tool_call_mismatch", "endpoint", "reasoning_tokens", "first_answer_event", "items", "model",
	"media_items", "media_bytes", // a speech-to-text request's audio (speech.go), and media.go's:
	"write_start_ns", "request_bytes", "image_items", "image_bytes", "video_items", "video_bytes", "audio_items", "audio_bytes", "audio_ms",
	"image_tokens", "video_tokens", "audio_tokens"}

// input is one recording opened for one pass by trace's column scanner.
type input struct {
	r *trace.RecordScanner
}

func openInput(path string, columns bool) (input, error) {
	r, err := trace.OpenScanner(path, trace.ScanOptions{Columns: scanColumns, Rows: !columns})
	if err != nil {
		return input{}, err
	}
	return input{r: r}, nil
}

func (in input) close() { in.r.Close() }

// events is the footer's count of the event column's levels, 0 when
// unknown.
func (in input) events() int { return in.r.Events() }

// read streams the file's rows into acc, validating each.
func (in input) read(f FileInfo, file int, acc *accumulator) (int64, error) {
	var n int64
	err := in.r.Scan(func(row int64, rec *trace.Record) error {
		n++
		return accept(rec, f, file, row, acc)
	})
	if err != nil && !errors.Is(err, ErrBadInput) {
		err = fmt.Errorf("%w: %w", err, ErrBadInput)
	}
	return n, err
}

// accept validates, aligns and adds row number row of file f.
func accept(rec *trace.Record, f FileInfo, file int, row int64, acc *accumulator) error {
	if err := validate(rec); err != nil {
		return fmt.Errorf("%s: row %d (request %q): %w: %w", f.Path, row, rec.RequestID, err, ErrBadInput)
	}
	rec.Shift(f.OffsetNs)
	acc.add(rec, file)
	return nil
}

// validate checks what the metrics rely on.
func validate(r *trace.Record) error {
	// The messages name the events, not one column: a recording stores
	// the times as microsecond gaps (event_gap_us), in schema 6 as
	// nanosecond gaps (event_gap_ns), before schema 6 as times (event_ns).
	if len(r.EventNs) != len(r.EventTokens) {
		return fmt.Errorf("%d event times (event_gap_us, or event_gap_ns or event_ns in an older recording) but %d event_tokens (the lists must be parallel)", len(r.EventNs), len(r.EventTokens))
	}
	for i := 1; i < len(r.EventNs); i++ {
		if r.EventNs[i] < r.EventNs[i-1] {
			return fmt.Errorf("event %d at %d ns is before event %d at %d ns (expected non-decreasing times: event_gap_us[%d] >= 0, or event_gap_ns[%d] >= 0 or event_ns non-decreasing in an older recording)",
				i, r.EventNs[i], i-1, r.EventNs[i-1], i, i)
		}
	}
	return nil
}

// Records analyzes in-memory records (already aligned) with meta as the
// run's metadata; it is Files without the decoding.
func Records(recs []trace.Record, meta trace.RunMeta, opts Options) *Summary {
	if opts.Window.IsSteady() {
		s, err := steadyPass(opts, func(o Options) (*Summary, error) { return records(recs, meta, o), nil })
		if err != nil { // no successful request: the whole run, which has none
			opts.Window = Window{}
			return records(recs, meta, opts)
		}
		return s
	}
	return records(recs, meta, opts)
}

func records(recs []trace.Record, meta trace.RunMeta, opts Options) *Summary {
	acc := newAccumulator(opts)
	acc.files = []fileDefaults{fileDefaultsOf(meta, true)}
	acc.expectRows = len(recs)
	for i := range recs {
		acc.add(&recs[i], 0)
	}
	s := acc.finish([]FileInfo{{Path: "(memory)", Rows: int64(len(recs)), Meta: meta}})
	s.StartWallNs = meta.StartWallNs
	return s
}

// describeRun reads the model, tokenizer and load settings from the first
// file's metadata (typed, or an older recording's config map: see
// trace.RunMeta.LoadSettings).
func (s *Summary) describeRun() {
	if len(s.Files) == 0 {
		return
	}
	m := s.Files[0].Meta
	if m.Trace != nil {
		s.Tokenizer = m.Trace.Tokenizer
	}
	l := m.LoadSettings()
	s.Model, s.MaxConcurrency, s.RequestRate, s.Burstiness = l.Model, l.MaxConcurrency, l.RequestRate, l.Burstiness
	if s.Burstiness <= 0 {
		s.Burstiness = 1
	}
}

func fmtMs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) + " ms" }
