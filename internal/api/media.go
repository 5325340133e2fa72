package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// MIME is the media type of item m's bytes (image/png, image/jpeg,
// video/mp4, audio/wav): what a data URI names.
func MIME(m *trace.Media) string {
	switch m.Kind {
	case trace.MediaImage:
		return "image/" + m.Format
	case trace.MediaVideo:
		return "video/" + m.Format
	case trace.MediaAudio:
		return "audio/" + m.Format
	}
	return "application/octet-stream"
}

// AppendDataURI appends item m as a JSON string: a data URI of its bytes
// (m.Data, base64) or, when m.URL is set, that URL. The caller made or
// loaded the bytes before the request was due.
func AppendDataURI(dst []byte, m *trace.Media) []byte {
	if m.URL != "" {
		return AppendString(dst, m.URL)
	}
	dst = append(dst, `"data:`...)
	dst = append(dst, MIME(m)...)
	dst = append(dst, ";base64,"...)
	dst = AppendBase64(dst, m)
	return append(dst, '"')
}

// AppendBase64 appends m.Data in standard base64 (no quotes): m.Base64
// when a reader encoded it ahead, else encoded here from the bytes in
// place (a copy of megabytes per request would be waste).
func AppendBase64(dst []byte, m *trace.Media) []byte {
	if m.Base64 != "" {
		return append(dst, m.Base64...)
	}
	return base64.StdEncoding.AppendEncode(dst, unsafe.Slice(unsafe.StringData(m.Data), len(m.Data)))
}

// ErrRemoteMedia is the reason a media part given by an http(s) URL is
// not kept: the request holds no bytes, and a trace names an item only by
// its bytes (a stored hash) or by a seed and a shape.
var ErrRemoteMedia = errors.New("given by URL: the request holds no bytes to record")

// ReadItem reads one media item a request carries (its decoded bytes) as
// a trace stores a real item: kind, format and shape probed from the bytes
// (media.Probe, what a server reads of them), Bytes, Hash the hex SHA-256,
// and the bytes in Data for the caller to store. A GIF stays a GIF: a
// server reads it, and its bytes are replayed as they are. What a probe
// read is remembered by hash for the next request that carries the item.
func ReadItem(data []byte) (trace.Media, error) {
	sum := sha256.Sum256(data)
	info, err := probed.probe(sum, data)
	if err != nil {
		return trace.Media{}, err
	}
	return trace.Media{Kind: info.Kind, Format: info.Format, Width: int32(info.Width), Height: int32(info.Height),
		Frames: int32(info.Frames), DurationMs: int32(info.Duration.Milliseconds()),
		Hash: hex.EncodeToString(sum[:]), Bytes: int64(len(data)), Data: string(data)}, nil
}

// probeCache remembers what Probe read of recent items by content hash: a
// conversation's requests carry its earlier images again in their
// history, and decoding an image in full costs far more than hashing it.
type probeCache struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]media.Info
}

// probeCacheLen bounds the cache (it is emptied when full).
const probeCacheLen = 4096

var probed probeCache

func (c *probeCache) probe(sum [sha256.Size]byte, data []byte) (media.Info, error) {
	c.mu.Lock()
	info, ok := c.seen[sum]
	c.mu.Unlock()
	if ok {
		return info, nil
	}
	info, err := media.Probe(data)
	if err != nil {
		return info, err
	}
	c.mu.Lock()
	if c.seen == nil || len(c.seen) >= probeCacheLen {
		c.seen = make(map[[sha256.Size]byte]media.Info)
	}
	c.seen[sum] = info
	c.mu.Unlock()
	return info, nil
}

// ReadDataURI reads an item given as a URL in a content part: a data URI
// (data:<type>;base64,<data>) is decoded and read (ReadItem); an http or
// https URL is ErrRemoteMedia. The error never quotes the URL, which may
// carry a signature.
func ReadDataURI(uri string) (trace.Media, error) {
	rest, ok := strings.CutPrefix(uri, "data:")
	if !ok {
		if strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://") {
			return trace.Media{}, ErrRemoteMedia
		}
		return trace.Media{}, errors.New("neither a data URI nor an http(s) URL")
	}
	head, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(head, ";base64") {
		return trace.Media{}, errors.New("a data URI without ;base64, before its data")
	}
	return ReadBase64(data)
}

// ReadBase64 decodes an item's base64 text (standard alphabet, padded or
// not, as servers accept it) and reads it (ReadItem).
func ReadBase64(s string) (trace.Media, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return trace.Media{}, fmt.Errorf("base64: %w", err)
		}
	}
	return ReadItem(b)
}
