package synth

import (
	"context"
	"fmt"
	"sort"

	"github.com/tracekit/tracekit/trace"
)

// Conversation is one conversation's turns in order (Turn = 0, 1, ...).
type Conversation []trace.Turn

// Source produces the conversations of a trace. A source with real arrival
// times (an imported production trace) sets StartOffsetNs and
// ArrivalOffsetNs itself; one without leaves them zero for an arrival
// Schedule to fill.
type Source interface {
	// Name is recorded as the trace's source ("synthetic", "sharegpt", ...).
	Name() string
	Conversations(ctx context.Context) ([]Conversation, error)
}

// Reporter is implemented by sources that say what they did (rows read,
// records dropped and why). The command prints the report and Generate
// stores it in the trace's metadata options.
type Reporter interface {
	Report() map[string]string
}

// Write sorts convs into the trace's row order (start offset, then
// conversation id) and writes them to path with meta.
func Write(path string, meta trace.TraceMeta, convs []Conversation) error {
	sort.SliceStable(convs, func(i, j int) bool {
		a, b := convs[i][0], convs[j][0]
		if a.StartOffsetNs != b.StartOffsetNs {
			return a.StartOffsetNs < b.StartOffsetNs
		}
		return a.ConversationID < b.ConversationID
	})
	w, err := trace.NewTraceWriter(path, meta)
	if err != nil {
		return err
	}
	for _, c := range convs {
		if err := w.Write(c...); err != nil {
			w.Close()
			return fmt.Errorf("writing conversation %s: %w", c[0].ConversationID, err)
		}
	}
	return w.Close()
}
