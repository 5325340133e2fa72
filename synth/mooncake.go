package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// MooncakeBlockSize is the tokens per hash_ids block of the Mooncake traces.
const MooncakeBlockSize = 512

// Mooncake imports a Mooncake (FAST'25, Kimi) trace: JSONL lines
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}
//
// with timestamp in ms from the trace start and hash_ids the ids of the
// prompt's BlockSize-token prefix blocks. Every line is a single-turn
// conversation arriving at its timestamp (many can share one); its prompt is
// synthesized from its hash_ids by Blocks, and PrefixHashes carries them.
type Mooncake struct {
	Opts  ImportOptions
	stats ImportStats
}

var _ Source = (*Mooncake)(nil)

// Name is "mooncake".
func (*Mooncake) Name() string { return "mooncake" }

// NewMooncake checks o and returns the source.
func NewMooncake(o ImportOptions) (*Mooncake, error) {
	if _, err := o.validate(MooncakeBlockSize); err != nil {
		return nil, err
	}
	return &Mooncake{Opts: o}, nil
}

// mooncakeLine is one JSONL line; pointers tell a missing field from zero.
type mooncakeLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  *int            `json:"input_length"`
	OutputLength *int            `json:"output_length"`
	HashIDs      []int64         `json:"hash_ids"`
}

// Conversations reads the file and builds one conversation per line.
func (m *Mooncake) Conversations(ctx context.Context) ([]Conversation, error) {
	o, err := m.Opts.validate(MooncakeBlockSize)
	if err != nil {
		return nil, fmt.Errorf("mooncake: %w", err)
	}
	m.Opts, m.stats = o, ImportStats{}
	bad := badRows{skip: o.SkipBad}
	var rows []importRow
	m.stats.InvalidUTF8, err = eachLine(o.Path, func(line int, b []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, rerr := parseMooncakeLine(o.Path, line, b)
		if rerr != nil {
			return bad.add(rerr)
		}
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mooncake: %w", err)
	}
	m.stats.Rows, m.stats.BadRows, m.stats.BadExamples = len(rows), bad.count, bad.first
	return o.assemble("mooncake", 0, rows, nil, &m.stats)
}

func parseMooncakeLine(path string, line int, b []byte) (importRow, *RowError) {
	var l mooncakeLine
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&l); err != nil {
		return importRow{}, jsonRowError(path, line, err)
	}
	e := func(field string, err error) (importRow, *RowError) {
		return importRow{}, &RowError{File: path, Line: line, Field: field, Err: err}
	}
	switch {
	case l.Timestamp == nil || string(l.Timestamp) == "null":
		return e("timestamp", errors.New("missing"))
	case l.InputLength == nil:
		return e("input_length", errors.New("missing"))
	case l.OutputLength == nil:
		return e("output_length", errors.New("missing"))
	case *l.InputLength < 0:
		return e("input_length", fmt.Errorf("%d is negative", *l.InputLength))
	case *l.OutputLength < 0:
		return e("output_length", fmt.Errorf("%d is negative", *l.OutputLength))
	case *l.InputLength > maxTokens:
		return e("input_length", fmt.Errorf("%d is above %d", *l.InputLength, maxTokens))
	case *l.OutputLength > maxTokens:
		return e("output_length", fmt.Errorf("%d is above %d", *l.OutputLength, maxTokens))
	}
	at, err := parseDecimalNs(string(l.Timestamp), 1e6)
	if err != nil {
		return e("timestamp", fmt.Errorf("%w (milliseconds)", err))
	}
	if at < 0 {
		return e("timestamp", fmt.Errorf("%s is negative", string(l.Timestamp)))
	}
	for i, h := range l.HashIDs {
		if h < 0 {
			return e("hash_ids", fmt.Errorf("element %d is negative (%d)", i, h))
		}
	}
	return importRow{line: line, at: at, input: *l.InputLength, output: *l.OutputLength, hashes: l.HashIDs}, nil
}

// jsonRowError names the field of a JSON type error, or the byte of a
// syntax error.
func jsonRowError(path string, line int, err error) *RowError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &RowError{File: path, Line: line, Field: te.Field, Err: fmt.Errorf("got JSON %s, expected %s", te.Value, te.Type)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &RowError{File: path, Line: line, Err: fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)}
	}
	return &RowError{File: path, Line: line, Err: fmt.Errorf("invalid JSON: %w", err)}
}

// Stats reports what the last Conversations call did with the file.
func (m *Mooncake) Stats() ImportStats { return m.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (m *Mooncake) Report() map[string]string { return m.Opts.metaOptions(m.stats) }

var _ Reporter = (*Mooncake)(nil)
