package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// LLaVA reads a LLaVA / ShareGPT-4V-style JSON (or JSON Lines) dataset:
// ShareGPT records ({"id", "conversations": [{"from", "value"}]}) with an
// "image" field naming one image file or a list of them. The text is read
// as ShareGPT's (every rule and filter of ShareGPT holds); the images are
// local files, relative to ImageDir or, without it, to the dataset's
// directory, read, decoded and stored once per distinct content in the
// trace's media file (MediaImporter), and sent as real items.
//
// An "<image>" placeholder in a user message places the next image of the
// record on that message and is dropped from the text; images left over
// go on the first user message; a placeholder with no image left is
// dropped and counted (image_placeholders_unmatched). Only the images of
// the conversations kept are read: a missing or undecodable image of one
// of them fails the import, naming the dataset, the record and the path.
type LLaVA struct {
	*ShareGPT
	imageDir string
	w        *trace.MediaWriter
}

// LLaVAOptions configure a LLaVA source: ShareGPT's, and where relative
// image paths are read from ("" is the dataset's directory).
type LLaVAOptions struct {
	ShareGPTOptions
	ImageDir string
}

var _ MediaImporter = (*LLaVA)(nil)

// NewLLaVA checks o and returns the source.
func NewLLaVA(o LLaVAOptions) (*LLaVA, error) {
	s, err := NewShareGPT(o.ShareGPTOptions)
	if err != nil {
		return nil, err
	}
	return &LLaVA{ShareGPT: s, imageDir: o.ImageDir}, nil
}

func (l *LLaVA) Name() string { return "llava" }

// UseMediaWriter implements MediaImporter.
func (l *LLaVA) UseMediaWriter(w *trace.MediaWriter) { l.w = w }

// Conversations implements Source.
func (l *LLaVA) Conversations(ctx context.Context) ([]Conversation, error) {
	if l.w == nil {
		return nil, fmt.Errorf("llava source: %w", ErrNoMediaWriter)
	}
	l.images = newImageFiles(l.Opts.Path, l.imageDir, l.w)
	l.pending = map[string]sharegptImages{}
	l.imageErr = nil
	return l.ShareGPT.Conversations(ctx)
}

// sharegptImages are a record's image paths, each with the index of the
// turn whose user message carries it.
type sharegptImages struct {
	rec   string // `record N (id "x")`, for messages
	paths []string
	turns []int
}

const imagePlaceholder = "<image>"

// placeImages reads rec's image field and places its images on c's turns
// (see LLaVA), dropping the placeholders from the text.
func (s *ShareGPT) placeImages(c *sharegptConv, index int, raw json.RawMessage) error {
	c.images.rec = fmt.Sprintf("record %d (id %q)", index, c.id)
	paths, err := imagePaths(raw)
	if err != nil {
		return fmt.Errorf("%s: %s: \"image\": %v", s.Opts.Path, c.images.rec, err)
	}
	next := 0
	for k := range c.turns {
		n := strings.Count(c.turns[k].user, imagePlaceholder)
		if n == 0 {
			continue
		}
		c.turns[k].user = strings.TrimSpace(strings.ReplaceAll(c.turns[k].user, imagePlaceholder, ""))
		for range n {
			if next == len(paths) {
				s.report["image_placeholders_unmatched"]++
				continue
			}
			c.images.paths = append(c.images.paths, paths[next])
			c.images.turns = append(c.images.turns, k)
			next++
		}
	}
	for _, p := range paths[next:] {
		c.images.paths = append(c.images.paths, p)
		c.images.turns = append(c.images.turns, 0)
	}
	return nil
}

// loadImages reads the images of the conversations kept and puts them on
// their user messages.
func (s *ShareGPT) loadImages(out []Conversation) error {
	if s.images == nil {
		return nil
	}
	for _, conv := range out {
		p, ok := s.pending[conv[0].ConversationID]
		if !ok {
			continue
		}
		for i, path := range p.paths {
			m, err := s.images.load(p.rec, path)
			if err != nil {
				return err
			}
			row := &conv[p.turns[i]]
			j := len(row.Messages) - 1 // build ends each turn with its user message
			row.Messages[j].Media = append(row.Messages[j].Media, m)
			s.report["images"]++
		}
	}
	s.report["image_files"] = len(s.images.seen)
	return nil
}
