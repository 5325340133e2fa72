package synth

import (
	"github.com/tracekit/tracekit/trace"

	"context"
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

var _ Streamer = (*Mooncake)(nil)

// Name is "mooncake".
func (*Mooncake) Name() string { return "mooncake" }

// NewMooncake checks o and returns the source.
func NewMooncake(o ImportOptions) (*Mooncake, error) {
	if _, err := o.validate(MooncakeBlockSize); err != nil {
		return nil, err
	}
	return &Mooncake{Opts: o}, nil
}

// Conversations reads the file and builds one conversation per line.
func (m *Mooncake) Conversations(ctx context.Context) ([]Conversation, error) { return collect(ctx, m) }

// Stream reads the file and emits one conversation per line (Streamer).
func (m *Mooncake) Stream(ctx context.Context, emit func(Conversation) error) error {
	o, err := m.Opts.validate(MooncakeBlockSize)
	if err != nil {
		return fmt.Errorf("mooncake: %w", err)
	}
	m.Opts, m.stats = o, ImportStats{}
	s, err := newRowStream(o, "mooncake", &m.stats, nil, false, emit)
	if err != nil {
		return err
	}
	err = readJSONL(ctx, o, &m.stats, func(line int, b []byte) (importRow, *RowError) {
		var l jsonlLengths // a Mooncake line has only the shared fields
		if err := decodeJSONLine(o.Path, line, b, &l); err != nil {
			return importRow{}, err
		}
		return l.row(o.Path, line, 1e6, "milliseconds")
	}, s.add)
	if err == nil {
		err = s.finish()
	}
	if err != nil {
		return fmt.Errorf("mooncake: %w", err)
	}
	return nil
}

// Prompts is the generator of the virtual prompts the last Stream wrote
// (Prompter); nil when they hold their text.
func (m *Mooncake) Prompts() *trace.PromptGenerator { return m.stats.Prompts }

// Stats reports what the last Conversations call did with the file.
func (m *Mooncake) Stats() ImportStats { return m.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (m *Mooncake) Report() map[string]string { return m.Opts.metaOptions(m.stats) }

var _ Reporter = (*Mooncake)(nil)
