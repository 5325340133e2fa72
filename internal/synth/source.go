package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/tracekit/tracekit/internal/record"
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
// go to a temporary file in path's directory, which is renamed to path
// only once it is complete and synced. An existing path is replaced only
// with replace; without, the rename fails with an error wrapping
// fs.ErrExist. On any failure, or when ctx ends first, path is left as it
// was and the temporary file is removed.
func Write(ctx context.Context, path string, replace bool, meta trace.TraceMeta, convs []Conversation) error {
	sort.SliceStable(convs, func(i, j int) bool {
		a, b := convs[i][0], convs[j][0]
		if a.StartOffsetNs != b.StartOffsetNs {
			return a.StartOffsetNs < b.StartOffsetNs
		}
		return a.ConversationID < b.ConversationID
	})
	f, err := createTrace(path, replace, meta, true)
	if err != nil {
		return err
	}
	for _, c := range convs {
		if err := f.write(c); err != nil {
			f.abort()
			return err
		}
		if err := ctx.Err(); err != nil {
			f.abort()
			return err
		}
	}
	return f.commit(meta)
}

// traceFile is a trace being written to a temporary file beside its path.
type traceFile struct {
	path, dir, tmp string
	replace        bool // commit may replace an existing path
	w              *trace.TraceWriter
}

// createTrace starts a trace file; fast compresses at zstd's fastest
// level (trace.TraceWriterOptions), for the in-memory sources, whose
// traces are mostly stored text. The streamed imports keep the default:
// their rows are numbers and hashes, which that level compresses worse.
func createTrace(path string, replace bool, meta trace.TraceMeta, fast bool) (*traceFile, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Not os.CreateTemp: the trace gets the mode a plain create gives it.
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%x", base, os.Getpid(), rand.Uint64()))
	w, err := trace.NewTraceWriterWith(tmp, meta, trace.TraceWriterOptions{FastCompression: fast})
	if err != nil {
		return nil, fmt.Errorf("writing trace %s: %w", path, err)
	}
	return &traceFile{path: path, dir: dir, tmp: tmp, replace: replace, w: w}, nil
}

func (f *traceFile) write(c Conversation) error {
	if err := f.w.Write(c...); err != nil {
		return fmt.Errorf("writing conversation %s of trace %s: %w", c[0].ConversationID, f.path, err)
	}
	return nil
}

// abort removes the temporary file.
func (f *traceFile) abort() {
	f.w.Close()
	os.Remove(f.tmp)
}

// commit stores meta, finishes the file and renames it to path: over an
// existing one only when f.replace, else never (record.RenameNoReplace,
// atomic: a file that appeared at path while the trace was written is
// kept, and the error wraps fs.ErrExist).
func (f *traceFile) commit(meta trace.TraceMeta) error {
	if err := f.w.SetMeta(meta); err != nil {
		f.abort()
		return fmt.Errorf("writing trace %s: %w", f.path, err)
	}
	if err := f.w.Close(); err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("writing trace %s: %w", f.path, err)
	}
	if f.replace {
		if err := os.Rename(f.tmp, f.path); err != nil {
			os.Remove(f.tmp)
			return fmt.Errorf("replacing %s: %w", f.path, err)
		}
	} else if err := record.RenameNoReplace(f.tmp, f.path); err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("writing trace %s: %w", f.path, err)
	}
	trace.SyncDir(f.dir)
	return nil
}
