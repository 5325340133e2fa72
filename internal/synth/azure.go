package synth

import (
	"github.com/tracekit/tracekit/trace"

	"context"
	"errors"
	"fmt"
	"io"
)

// Azure imports an Azure LLM inference trace (2023 or 2024): CSV
//
//	TIMESTAMP,ContextTokens,GeneratedTokens
//	2023-11-16 18:15:46.6805900,374,44
//
// 2023 files use CRLF, have no final newline and 7 fraction digits; 2024
// files end each timestamp in "+00:00" and some rows have no fraction. Both
// are parsed to the nanosecond without floats; a row's offset is its time
// minus the earliest row's (the first row, in the published files). Every
// row is a single-turn conversation; the traces carry no prefix hashes, so
// prompts are private text (PrefixHashes empty).
type Azure struct {
	Opts  ImportOptions
	stats ImportStats
}

var _ Streamer = (*Azure)(nil)

// Name is "azure".
func (*Azure) Name() string { return "azure" }

// NewAzure checks o and returns the source.
func NewAzure(o ImportOptions) (*Azure, error) {
	if _, err := o.validate(MooncakeBlockSize); err != nil {
		return nil, err
	}
	return &Azure{Opts: o}, nil
}

// Conversations reads the CSV and builds one conversation per row.
func (a *Azure) Conversations(ctx context.Context) ([]Conversation, error) { return collect(ctx, a) }

// Stream reads the CSV and emits one conversation per row (Streamer).
func (a *Azure) Stream(ctx context.Context, emit func(Conversation) error) error {
	o, err := a.Opts.validate(MooncakeBlockSize)
	if err != nil {
		return fmt.Errorf("azure: %w", err)
	}
	a.Opts, a.stats = o, ImportStats{}
	s, err := newRowStream(o, "azure", &a.stats, nil, true, emit)
	if err != nil {
		return err
	}
	err = readAzure(ctx, o.Path, o.SkipBad, &a.stats, s.add)
	if err == nil {
		err = s.finish()
	}
	if err != nil {
		return fmt.Errorf("azure: %w", err)
	}
	return nil
}

// readAzure hands every well-formed row to use; it fills st's Rows,
// BadRows, BadExamples and InvalidUTF8.
func readAzure(ctx context.Context, path string, skip bool, st *ImportStats, use func(importRow) error) error {
	bad := badRows{skip: skip}
	t, err := openCSV(path)
	if err != nil {
		return err
	}
	defer t.Close()
	var cols [3]int
	for i, name := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if cols[i], err = t.need(name); err != nil {
			return err
		}
	}
	names := [3]string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, line, err := t.next()
		if errors.Is(err, io.EOF) {
			st.BadRows, st.BadExamples, st.InvalidUTF8 = bad.count, bad.first, t.invalidUTF8()
			return nil
		}
		var rerr *RowError
		if errors.As(err, &rerr) {
			if err := bad.add(rerr); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		r := importRow{line: line}
		var ferr error
		field := 0
		if r.at, ferr = parseWallNs(rec[cols[0]]); ferr == nil {
			field = 1
			if r.input, ferr = parseCount(rec[cols[1]]); ferr == nil {
				field = 2
				r.output, ferr = parseCount(rec[cols[2]])
			}
		}
		if ferr != nil {
			if err := bad.add(&RowError{File: path, Line: line, Field: names[field], Err: ferr}); err != nil {
				return err
			}
			continue
		}
		st.Rows++
		if err := use(r); err != nil {
			return err
		}
	}
}

// Prompts is the generator of the virtual prompts the last Stream wrote
// (Prompter); nil when they hold their text.
func (a *Azure) Prompts() *trace.PromptGenerator { return a.stats.Prompts }

// Stats reports what the last Conversations call did with the file.
func (a *Azure) Stats() ImportStats { return a.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (a *Azure) Report() map[string]string { return a.Opts.metaOptions(a.stats) }

var _ Reporter = (*Azure)(nil)
