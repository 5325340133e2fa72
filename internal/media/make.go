package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/tracekit/tracekit/trace"
)

// Bounds on what Make makes: a trace asking for more is refused rather
// than allowed to exhaust memory.
const (
	MaxPixels     = 64 << 20 // width x height of an image or a video frame
	MaxDurationMs = 3600_000 // an hour of audio
	MaxFrames     = 10_000
)

// JPEGQuality is the quality JPEG images are encoded at: Pillow's default,
// which vLLM's random-mm dataset saves its images with.
const JPEGQuality = 75

// AudioRate is the sample rate of made audio: 16 kHz, what speech models
// take.
const AudioRate = 16000

// Check reports whether Make can make m, naming the field at fault.
func Check(m *trace.Media) error {
	switch m.Kind {
	case trace.MediaImage:
		if m.Format != "png" && m.Format != "jpeg" {
			return fmt.Errorf("image format %q: want png or jpeg", m.Format)
		}
		return checkSize(m)
	case trace.MediaAudio:
		if m.Format != "wav" {
			return fmt.Errorf("audio format %q: want wav", m.Format)
		}
		if m.DurationMs <= 0 || m.DurationMs > MaxDurationMs {
			return fmt.Errorf("audio duration_ms %d: want 1 to %d", m.DurationMs, MaxDurationMs)
		}
		return nil
	case trace.MediaVideo:
		return checkVideo(m)
	}
	return fmt.Errorf("media kind %q: want image, video or audio", m.Kind)
}

func checkSize(m *trace.Media) error {
	if m.Width <= 0 || m.Height <= 0 || int64(m.Width)*int64(m.Height) > MaxPixels {
		return fmt.Errorf("%s size %dx%d: want positive sides of at most %d pixels in all", m.Kind, m.Width, m.Height, MaxPixels)
	}
	return nil
}

// Make appends the bytes of the virtual item m to dst: the same bytes for
// the same m, whatever the call. A real item (m.Hash set) has no bytes to
// make: its bytes come from the trace's media file.
func Make(dst []byte, m *trace.Media) ([]byte, error) { return MakeYielding(dst, m, nil) }

// MakeYielding is Make calling yield, when not nil, between steps of the
// work: every 64 Ki pixels or samples made and every write of encoded
// output (4 KiB from the JPEG encoder, up to 32 KiB from the PNG one), a
// fraction of a millisecond apart on one core. A caller making media beside
// latency-bound work can step aside there (replay's workers sleep while a
// request is due). The bytes are Make's.
func MakeYielding(dst []byte, m *trace.Media, yield func()) ([]byte, error) {
	if m.Hash != "" {
		return dst, fmt.Errorf("media %s: a real item's bytes are stored, not made", m.Hash)
	}
	if err := Check(m); err != nil {
		return dst, err
	}
	if yield == nil {
		yield = func() {}
	}
	r := rand.New(rand.NewPCG(uint64(m.Seed), 0x6d65646961)) // "media"
	switch m.Kind {
	case trace.MediaImage:
		return appendImage(dst, m, r, yield)
	case trace.MediaVideo:
		return appendVideo(dst, m, r, yield)
	default:
		return appendWAV(dst, m, r, yield), nil
	}
}

// yieldStep is how many pixels or samples are made between two yields.
const yieldStep = 64 << 10

// yieldWriter calls yield after each write to w.
type yieldWriter struct {
	w     io.Writer
	yield func()
}

func (y yieldWriter) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	y.yield()
	return n, err
}

// appendImage encodes an image of uniform random pixels.
func appendImage(dst []byte, m *trace.Media, r *rand.Rand, yield func()) ([]byte, error) {
	p := getPixels(4 * int(m.Width) * int(m.Height))
	defer putPixels(p)
	pix := randomPixels(*p, r, yield)
	b := bytes.NewBuffer(dst)
	w := yieldWriter{b, yield} // not a ByteWriter: each encoder buffers its output
	var err error
	if m.Format == "png" {
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, asNRGBA(pix, m))
	} else {
		err = jpeg.Encode(w, asRGBA(pix, m), &jpeg.Options{Quality: JPEGQuality})
	}
	return b.Bytes(), err
}

// pixels holds pixel buffers (*[]byte) between images: a megapixel is 4
// MB, which replay's look-ahead would otherwise leave as garbage for every
// image it makes, and collect while requests are being sent. Buffers of
// more than maxPooledPixels bytes are not kept.
var pixels sync.Pool

const maxPooledPixels = 32 << 20

// getPixels returns a buffer of n bytes, its contents undefined.
func getPixels(n int) *[]byte {
	if p, _ := pixels.Get().(*[]byte); p != nil && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

func putPixels(p *[]byte) {
	if cap(*p) <= maxPooledPixels {
		pixels.Put(p)
	}
}

// randomPixels fills pix with opaque pixels of uniform random color, 4
// bytes each (R, G, B, 0xff), and returns it.
func randomPixels(pix []byte, r *rand.Rand, yield func()) []byte {
	for start := 0; start < len(pix); start += 4 * yieldStep {
		for i := start; i < min(start+4*yieldStep, len(pix)); i += 4 {
			v := r.Uint32()
			pix[i], pix[i+1], pix[i+2], pix[i+3] = byte(v), byte(v>>8), byte(v>>16), 0xff
		}
		yield()
	}
	return pix
}

// asNRGBA and asRGBA are the image of m's size whose pixels are pix. The
// pixels are opaque, so the two are the same picture in the same bytes;
// the JPEG encoder reads an *image.RGBA directly but any other type pixel
// by pixel through an interface, a million allocations for a megapixel
// (10x slower), so JPEGs are encoded from an RGBA. PNGs stay NRGBA: the
// bytes made are those the format was first made with.
func asNRGBA(pix []byte, m *trace.Media) *image.NRGBA {
	return &image.NRGBA{Pix: pix, Stride: 4 * int(m.Width), Rect: image.Rect(0, 0, int(m.Width), int(m.Height))}
}

func asRGBA(pix []byte, m *trace.Media) *image.RGBA {
	return &image.RGBA{Pix: pix, Stride: 4 * int(m.Width), Rect: image.Rect(0, 0, int(m.Width), int(m.Height))}
}

// appendWAV appends a RIFF WAVE file of 16-bit mono PCM noise.
func appendWAV(dst []byte, m *trace.Media, r *rand.Rand, yield func()) []byte {
	n := int(int64(m.DurationMs) * AudioRate / 1000)
	data := uint32(2 * n)
	dst = append(dst, "RIFF"...)
	dst = binary.LittleEndian.AppendUint32(dst, 36+data)
	dst = append(dst, "WAVEfmt "...)
	dst = binary.LittleEndian.AppendUint32(dst, 16)
	dst = binary.LittleEndian.AppendUint16(dst, 1) // PCM
	dst = binary.LittleEndian.AppendUint16(dst, 1) // mono
	dst = binary.LittleEndian.AppendUint32(dst, AudioRate)
	dst = binary.LittleEndian.AppendUint32(dst, 2*AudioRate) // bytes per second
	dst = binary.LittleEndian.AppendUint16(dst, 2)           // block align
	dst = binary.LittleEndian.AppendUint16(dst, 16)          // bits per sample
	dst = append(dst, "data"...)
	dst = binary.LittleEndian.AppendUint32(dst, data)
	for start := 0; start < n; start += yieldStep {
		for range min(yieldStep, n-start) {
			v := math.Max(-1, math.Min(1, 0.3*r.NormFloat64()))
			dst = binary.LittleEndian.AppendUint16(dst, uint16(int16(math.Round(v*math.MaxInt16))))
		}
		yield()
	}
	return dst
}

// WAVHeaderBytes is the size of the header of a clip Make writes.
const WAVHeaderBytes = 44

// WAVSeconds is the duration of n clips Make wrote, of size bytes in all
// (16-bit mono PCM at AudioRate after a WAVHeaderBytes header each): what
// a recording's media_bytes of audio says of the audio sent.
func WAVSeconds(bytes int64, n int32) float64 {
	return float64(max(bytes-int64(n)*WAVHeaderBytes, 0)) / (2 * AudioRate)
}
