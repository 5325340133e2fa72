package synth

import (
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

var _ Source = (*Azure)(nil)

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
func (a *Azure) Conversations(ctx context.Context) ([]Conversation, error) {
	o, err := a.Opts.validate(MooncakeBlockSize)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	a.Opts, a.stats = o, ImportStats{}
	rows, bad, invalid, err := readAzure(ctx, o.Path, o.SkipBad)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	a.stats.Rows, a.stats.BadRows, a.stats.BadExamples, a.stats.InvalidUTF8 = len(rows), bad.count, bad.first, invalid
	var origin int64
	if len(rows) > 0 {
		origin = rows[0].at
		for _, r := range rows {
			origin = min(origin, r.at)
		}
	}
	return o.assemble("azure", origin, rows, nil, &a.stats)
}

func readAzure(ctx context.Context, path string, skip bool) ([]importRow, badRows, int64, error) {
	bad := badRows{skip: skip}
	t, err := openCSV(path)
	if err != nil {
		return nil, bad, 0, err
	}
	defer t.Close()
	var cols [3]int
	for i, name := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if cols[i], err = t.need(name); err != nil {
			return nil, bad, 0, err
		}
	}
	names := [3]string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
	var rows []importRow
	for {
		if err := ctx.Err(); err != nil {
			return nil, bad, 0, err
		}
		rec, line, err := t.next()
		if errors.Is(err, io.EOF) {
			return rows, bad, t.invalidUTF8(), nil
		}
		var rerr *RowError
		if errors.As(err, &rerr) {
			if err := bad.add(rerr); err != nil {
				return nil, bad, 0, err
			}
			continue
		}
		if err != nil {
			return nil, bad, 0, err
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
				return nil, bad, 0, err
			}
			continue
		}
		rows = append(rows, r)
	}
}

// Stats reports what the last Conversations call did with the file.
func (a *Azure) Stats() ImportStats { return a.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (a *Azure) Report() map[string]string { return a.Opts.metaOptions(a.stats) }

var _ Reporter = (*Azure)(nil)
