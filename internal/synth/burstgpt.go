package synth

import (
	"github.com/tracekit/tracekit/trace"

	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// What BurstGPT.Failed does with failed requests (zero response tokens).
const (
	FailedDrop = "drop" // leave them out (the default, as vLLM's loader does)
	FailedKeep = "keep" // replay them as ordinary requests asking for 1 token
	FailedFlag = "flag" // keep them, with "-failed" ending the conversation id
)

// BurstGPT imports a BurstGPT trace (Azure OpenAI GPT service): CSV with
// columns found by name,
//
//	Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//	5,ChatGPT,472,18,490,Conversation log
//
// Timestamp is seconds from the trace start. Newer files add "Session ID"
// (rows sharing one form a conversation, turns ordered by time) and
// "Elapsed time" (seconds the request took, used to turn the arrival gap
// into a think time). Rows with zero response tokens are failed requests,
// handled by Failed. Rows carry no prefix hashes: prompts are private text.
type BurstGPT struct {
	Opts   BurstGPTOptions
	stats  ImportStats
	failed int
}

// BurstGPTOptions are the import options and BurstGPT's filters.
type BurstGPTOptions struct {
	ImportOptions
	FilterModel string // keep only rows whose Model is this (case-insensitive); empty keeps all
	LogType     string // keep only rows whose Log Type is this or starts with it ("conversation", "api"); empty keeps all
	Failed      string // FailedDrop (default), FailedKeep or FailedFlag
}

var _ Streamer = (*BurstGPT)(nil)

// Name is "burstgpt".
func (*BurstGPT) Name() string { return "burstgpt" }

// NewBurstGPT checks o and returns the source.
func NewBurstGPT(o BurstGPTOptions) (*BurstGPT, error) {
	if _, err := o.validate(); err != nil {
		return nil, err
	}
	return &BurstGPT{Opts: o}, nil
}

// validate checks the options and fills the defaults.
func (o BurstGPTOptions) validate() (BurstGPTOptions, error) {
	imp, err := o.ImportOptions.validate(MooncakeBlockSize)
	if err != nil {
		return o, err
	}
	o.ImportOptions = imp
	switch o.Failed {
	case "":
		o.Failed = FailedDrop
	case FailedDrop, FailedKeep, FailedFlag:
	default:
		return o, fieldErr("BurstGPTOptions", "Failed", "failed-request mode %q: expected drop, keep or flag", o.Failed)
	}
	return o, nil
}

// burstCols are the column indexes of a BurstGPT file; -1 when absent.
type burstCols struct {
	ts, model, req, resp, logType, session, elapsed int
}

// Conversations reads the CSV, filters it and groups sessions.
func (b *BurstGPT) Conversations(ctx context.Context) ([]Conversation, error) { return collect(ctx, b) }

// Stream reads the CSV, filters it, groups sessions and emits
// conversations (Streamer).
func (b *BurstGPT) Stream(ctx context.Context, emit func(Conversation) error) error {
	o, err := b.Opts.validate()
	if err != nil {
		return fmt.Errorf("burstgpt: %w", err)
	}
	b.Opts, b.stats, b.failed = o, ImportStats{}, 0
	s, err := newRowStream(o.ImportOptions, "burstgpt", &b.stats, &sessions{open: map[string]*openConv{}, closed: map[string]bool{}}, false, emit)
	if err != nil {
		return err
	}
	span, err := b.read(ctx, s.add)
	if err == nil {
		err = s.finish()
	}
	if err != nil {
		return fmt.Errorf("burstgpt: %w", err)
	}
	b.stats.SourceSpanNs = span // of every row, not only the ones the filters kept
	return nil
}

// read hands the rows the filters keep to use and returns the time span
// of all rows.
func (b *BurstGPT) read(ctx context.Context, use func(importRow) error) (int64, error) {
	path := b.Opts.Path
	bad := badRows{skip: b.Opts.SkipBad}
	t, err := openCSV(path)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	c := burstCols{model: t.optional("Model"), logType: t.optional("Log Type"), session: t.optional("Session ID"), elapsed: t.optional("Elapsed time")}
	for _, need := range []struct {
		name string
		at   *int
	}{{"Timestamp", &c.ts}, {"Request tokens", &c.req}, {"Response tokens", &c.resp}} {
		if *need.at, err = t.need(need.name); err != nil {
			return 0, err
		}
	}
	if b.Opts.FilterModel != "" && c.model < 0 {
		return 0, fmt.Errorf("%s line 1: filtering by model %q needs a Model column", path, b.Opts.FilterModel)
	}
	if b.Opts.LogType != "" && c.logType < 0 {
		return 0, fmt.Errorf("%s line 1: filtering by log type %q needs a Log Type column", path, b.Opts.LogType)
	}
	lo, hi := int64(-1), int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		rec, line, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		var rerr *RowError
		if errors.As(err, &rerr) {
			if err := bad.add(rerr); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		r, rerr := parseBurstRow(path, line, rec, c)
		if rerr != nil {
			if err := bad.add(rerr); err != nil {
				return 0, err
			}
			continue
		}
		b.stats.Rows++
		if lo < 0 || r.at < lo {
			lo = r.at
		}
		hi = max(hi, r.at)
		if r.failed {
			b.failed++
		}
		if !b.keep(rec, c, &r) {
			b.stats.Filtered++
			continue
		}
		if err := use(r); err != nil {
			return 0, err
		}
	}
	b.stats.BadRows, b.stats.BadExamples, b.stats.InvalidUTF8 = bad.count, bad.first, t.invalidUTF8()
	return max(hi-lo, 0), nil
}

func parseBurstRow(path string, line int, rec []string, c burstCols) (importRow, *RowError) {
	e := func(field string, err error) (importRow, *RowError) {
		return importRow{}, &RowError{File: path, Line: line, Field: field, Err: err}
	}
	r := importRow{line: line}
	var err error
	if r.at, err = parseDecimalNs(rec[c.ts], 1e9); err != nil {
		return e("Timestamp", fmt.Errorf("%w (seconds)", err))
	}
	if r.at < 0 {
		return e("Timestamp", fmt.Errorf("%q is negative", rec[c.ts]))
	}
	if r.input, err = parseCount(rec[c.req]); err != nil {
		return e("Request tokens", err)
	}
	if r.output, err = parseCount(rec[c.resp]); err != nil {
		return e("Response tokens", err)
	}
	r.failed = r.output == 0
	if c.elapsed >= 0 && strings.TrimSpace(rec[c.elapsed]) != "" {
		if r.elapsed, err = parseDecimalNs(rec[c.elapsed], 1e9); err != nil || r.elapsed < 0 {
			return e("Elapsed time", fmt.Errorf("%q is not a non-negative number of seconds", rec[c.elapsed]))
		}
	}
	if c.session >= 0 {
		if s := strings.TrimSpace(rec[c.session]); s != "" {
			r.group = "s" + strings.ToValidUTF8(s, "\uFFFD") // it becomes the conversation id
		}
	}
	return r, nil
}

// keep applies the model, log-type and failed-request filters; a kept
// flagged row gets its conversation key marked.
func (b *BurstGPT) keep(rec []string, c burstCols, r *importRow) bool {
	if b.Opts.FilterModel != "" && !strings.EqualFold(strings.TrimSpace(rec[c.model]), b.Opts.FilterModel) {
		return false
	}
	if b.Opts.LogType != "" {
		lt := strings.ToLower(strings.TrimSpace(rec[c.logType]))
		if !strings.HasPrefix(lt, strings.ToLower(b.Opts.LogType)) {
			return false
		}
	}
	if !r.failed {
		return true
	}
	switch b.Opts.Failed {
	case FailedDrop:
		return false
	case FailedFlag:
		if r.group == "" {
			r.group = fmt.Sprintf("l%09d", r.line)
		}
		r.group += "-failed"
	}
	return true
}

// sessions makes one conversation of the rows sharing a key (a session),
// and one of each row without a key. A session with a flagged failed turn
// is one conversation marked "-failed" as a whole.
type sessions struct {
	open   map[string]*openConv
	closed map[string]bool
}

func (g *sessions) place(s *rowStream, r importRow) (*openConv, string, bool, error) {
	key, _ := strings.CutSuffix(r.group, "-failed")
	if key == "" || strings.HasPrefix(key, "l") {
		return nil, fmt.Sprintf("l%09d", r.line), true, nil
	}
	if c, ok := g.open[key]; ok {
		return c, "", false, nil
	}
	if g.closed[key] {
		return nil, "", false, s.closedError(r, "Session ID", fmt.Sprintf("session %q", strings.TrimPrefix(key, "s")), nil)
	}
	return nil, key, false, nil
}

func (g *sessions) joined(_ *rowStream, c *openConv, r importRow) {
	if strings.HasSuffix(r.group, "-failed") {
		c.failed = true
	}
	if c.elem != nil {
		g.open[c.key] = c
	}
}

func (g *sessions) done(_ *rowStream, c *openConv) {
	delete(g.open, c.key)
	g.closed[c.key] = true
}

func (*sessions) multi() bool { return true }

// Prompts is the generator of the virtual prompts the last Stream wrote
// (Prompter); nil when they hold their text.
func (b *BurstGPT) Prompts() *trace.PromptGenerator { return b.stats.Prompts }

// Stats reports what the last Conversations call did with the file.
func (b *BurstGPT) Stats() ImportStats { return b.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (b *BurstGPT) Report() map[string]string {
	m := b.Opts.ImportOptions.metaOptions(b.stats)
	m["filter_model"] = b.Opts.FilterModel
	m["log_type"] = b.Opts.LogType
	m["failed"] = b.Opts.Failed
	m["failed_rows"] = fmt.Sprint(b.failed) // in the whole file, before the filters
	return m
}

var _ Reporter = (*BurstGPT)(nil)
