package replay

import (
	"fmt"
	"github.com/tracekit/tracekit/internal/fielderr"

	"github.com/tracekit/tracekit/trace"
)

// Real media items (trace.Media.Hash set) are not made but loaded: their
// bytes are in the trace's media file (trace.MediaStore). Before the run,
// every hash the trace names is looked up there, so a missing file or
// item is bad input found before anything is sent; in the run, the
// look-ahead loads each item and verifies its SHA-256 (materializer).

// mediaRef is a real item's hash and the turn that first carries it.
type mediaRef struct {
	hash string
	conv string
	turn int32
	row  int64 // the turn's row in the trace
}

// appendRealMedia appends to refs the hashes of conv's real items not in
// seen, and notes them there. row is the trace row of conv's first turn.
func appendRealMedia(refs []mediaRef, seen map[string]bool, conv []trace.Turn, row int64) []mediaRef {
	for i := range conv {
		for _, msg := range conv[i].Messages {
			for _, m := range msg.Media {
				if m.Hash == "" || seen[m.Hash] {
					continue
				}
				seen[m.Hash] = true
				refs = append(refs, mediaRef{hash: m.Hash, conv: conv[i].ConversationID, turn: conv[i].Turn, row: row + int64(i)})
			}
		}
	}
	return refs
}

// where names a reference's turn in the trace.
func (r *Runner) where(ref mediaRef) string {
	name := r.tracePath
	if name == "" {
		name = r.cfg.Trace
	}
	s := fmt.Sprintf("conversation %q turn %d (row %d)", ref.conv, ref.turn, ref.row)
	if name != "" {
		s = "trace " + name + ": " + s
	}
	return s
}

// openMediaStore opens the media file when the trace has real items
// (Config.MediaFile, else the one beside the trace) and checks that it
// holds every one, naming the first turn of a missing one.
func (r *Runner) openMediaStore() error {
	if len(r.realMedia) == 0 {
		return nil
	}
	first := r.realMedia[0]
	path := r.cfg.MediaFile
	if path == "" {
		tr := r.tracePath
		if tr == "" {
			tr = r.cfg.Trace
		}
		if tr == "" {
			return fielderr.Errorf(configType, "MediaFile", "%s carries a real media item (sha256 %s) and no media file holds its bytes: set %s", r.where(first), first.hash, fielderr.Name("MediaFile"))
		}
		path = trace.MediaPath(tr)
	}
	s, err := trace.OpenMediaFile(path)
	if err != nil {
		return fmt.Errorf("%s carries a real media item (sha256 %s) whose bytes are in the media file, which cannot be read: %w", r.where(first), first.hash, err)
	}
	for _, ref := range r.realMedia {
		if _, ok := s.Has(ref.hash); !ok {
			s.Close()
			return fmt.Errorf("%s carries a real media item (sha256 %s) that its media file %s does not hold", r.where(ref), ref.hash, path)
		}
	}
	r.store = s
	return nil
}
