package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
// conversation id) and writes them to path with meta, atomically: the rows
// go to a temporary file in path's directory, which replaces path only
// once it is complete and synced. On any failure, or when ctx ends first,
// path is left as it was and the temporary file is removed.
func Write(ctx context.Context, path string, meta trace.TraceMeta, convs []Conversation) (err error) {
	sort.SliceStable(convs, func(i, j int) bool {
		a, b := convs[i][0], convs[j][0]
		if a.StartOffsetNs != b.StartOffsetNs {
			return a.StartOffsetNs < b.StartOffsetNs
		}
		return a.ConversationID < b.ConversationID
	})
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Not os.CreateTemp: the trace gets the mode a plain create gives it.
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%x", base, os.Getpid(), rand.Uint64()))
	w, err := trace.NewTraceWriter(tmp, meta)
	if err != nil {
		return fmt.Errorf("writing trace %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	for _, c := range convs {
		if err := w.Write(c...); err != nil {
			w.Close()
			return fmt.Errorf("writing conversation %s of trace %s: %w", c[0].ConversationID, path, err)
		}
		if err := ctx.Err(); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("writing trace %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	trace.SyncDir(dir)
	return nil
}
