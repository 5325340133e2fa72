package capture

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// mediaWriter stores the bytes of a segment's real media items in the
// file beside its trace (trace.MediaPath), each distinct content once:
// trace.MediaWriter. Used by the accounting worker only.
type mediaWriter interface {
	// Put stores data unless its content is stored already and returns m
	// as a real item of it (Hash and Bytes set, Data cleared).
	Put(m trace.Media, data []byte) (trace.Media, error)
	// Bytes is the bytes of the distinct items stored so far.
	Bytes() int64
	// Close puts the file in place (none when nothing was stored).
	Close() error
}

var _ mediaWriter = (*trace.MediaWriter)(nil)

// mediaState is what a proxy keeps about the media of the requests it
// records: the key that makes a redacted item's seed, and the parts it
// could not keep.
type mediaState struct {
	// key makes each redacted item's seed from its content hash (keyed,
	// so the trace does not tell which known item a request carried,
	// while equal items within a capture stay equal: a server's encoder
	// cache sees the same repeats when the trace is replayed).
	key       [32]byte
	skipped   atomic.Int64 // media parts not recorded
	skipWarn  atomic.Bool
	synthWarn atomic.Bool
}

func newMediaState() *mediaState {
	s := &mediaState{}
	rand.Read(s.key[:])
	return s
}

// recordMedia makes the media of a turn's new messages what the trace
// holds: under RedactContent each real item becomes a virtual one of the
// same shape (redacted); otherwise its bytes go into the segment's media
// file and the turn keeps the item by hash. An item the media file
// refuses is dropped from the turn, said once in the log with the reason.
// The media file's size does not count toward RotateBytes, which bounds
// the trace text held in memory: the writer holds a bounded buffer.
func (p *Proxy) recordMedia(seg *segment, msgs []trace.Message, requestID string) {
	for i := range msgs {
		m := &msgs[i]
		if len(m.Media) == 0 {
			continue
		}
		kept := m.Media[:0]
		for _, it := range m.Media {
			var err error
			if p.cfg.RedactContent {
				it, err = p.media.redacted(it)
			} else {
				it, err = seg.putMedia(it)
			}
			if err != nil {
				p.skipMedia(requestID, 1, err)
				continue
			}
			kept = append(kept, it)
		}
		clear(m.Media[len(kept):])
		m.Media = kept
		if len(m.Media) == 0 {
			m.Media = nil
		}
	}
}

// skipMedia counts n media parts of a request that its turn does not
// carry, and says why the first time.
func (p *Proxy) skipMedia(requestID string, n int, why error) {
	p.media.skipped.Add(int64(n))
	if p.media.skipWarn.CompareAndSwap(false, true) {
		p.cfg.Logf("capture: request %s: a media part is not recorded: %v; its turn is recorded without it "+
			"(warned once; Close reports how many)", requestID, why)
	}
}

// redacted is a virtual item in place of the real item m: the same kind,
// format and shape, its bytes made by internal/media from a seed, so
// nothing of m's bytes is kept. Only PNG and JPEG images, WAV audio and
// MP4 video are made: a GIF becomes a PNG of its size.
func (ms *mediaState) redacted(m trace.Media) (trace.Media, error) {
	mac := hmac.New(sha256.New, ms.key[:])
	mac.Write([]byte(m.Hash))
	seed := int64(binary.LittleEndian.Uint64(mac.Sum(nil)) >> 1)
	v := trace.Media{Kind: m.Kind, Format: m.Format, Width: m.Width, Height: m.Height, Frames: m.Frames,
		DurationMs: m.DurationMs, Seed: seed}
	if v.Kind == trace.MediaImage && v.Format != "png" && v.Format != "jpeg" {
		v.Format = "png"
	}
	if err := media.Check(&v); err != nil {
		return trace.Media{}, fmt.Errorf("no synthetic %s of this shape can be made: %w", m.Kind, err)
	}
	return v, nil
}

// putMedia stores item m's bytes (m.Data) in the segment's media file,
// created on the first item, and returns the item as the trace keeps it.
func (s *segment) putMedia(m trace.Media) (trace.Media, error) {
	if s.mediaErr != nil {
		return trace.Media{}, s.mediaErr
	}
	if s.media == nil {
		w, err := trace.NewMediaWriter(trace.MediaPath(s.tracePath), false)
		if err != nil {
			s.mediaErr = fmt.Errorf("segment %d: media file: %w", s.n, err)
			return trace.Media{}, s.mediaErr
		}
		s.media = w
	}
	data := unsafe.Slice(unsafe.StringData(m.Data), len(m.Data)) // read only, not kept
	m.Data = ""
	before := s.media.Bytes()
	m, err := s.media.Put(m, data)
	if err == nil && s.media.Bytes() != before {
		s.journalMedia(m, data) // stored for the first time
	}
	return m, err
}
