package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/jpeg"
	"math/rand/v2"

	"github.com/tracekit/tracekit/trace"
)

// VideoFPS is the frame rate of a made video that gives no duration: 30
// frames per second, what vLLM's random-mm dataset writes its videos at.
// A video with DurationMs plays its frames over that duration instead.
const VideoFPS = 30

// MaxVideoPixels bounds a made video's frames times its frame size, so
// that its encoding (a JPEG per frame) stays within seconds and its bytes
// within what a request body carries.
const MaxVideoPixels = 1 << 28

// The codec of made video. Motion JPEG, one baseline JPEG per sample,
// because it is writable with the standard library and every decoder a
// server uses reads it: ffmpeg's mov demuxer (which OpenCV and PyAV use)
// maps the QuickTime sample entry 'jpeg' (Photo-JPEG) to its mjpeg
// decoder, as it does 'mjpa'; 'jpeg' is the plain form, with no
// Motion-JPEG-A marker segment to write.
const videoCodec = "jpeg"

func checkVideo(m *trace.Media) error {
	if m.Format != "mp4" {
		return fmt.Errorf("video format %q: want mp4", m.Format)
	}
	if err := checkSize(m); err != nil {
		return err
	}
	if m.Frames <= 0 || m.Frames > MaxFrames {
		return fmt.Errorf("video frames %d: want 1 to %d", m.Frames, MaxFrames)
	}
	if px := int64(m.Width) * int64(m.Height) * int64(m.Frames); px > MaxVideoPixels {
		return fmt.Errorf("video of %d frames of %dx%d: %d pixels in all, more than %d", m.Frames, m.Width, m.Height, px, MaxVideoPixels)
	}
	if m.DurationMs < 0 || m.DurationMs > MaxDurationMs {
		return fmt.Errorf("video duration_ms %d: want 0 (%d fps) to %d", m.DurationMs, VideoFPS, MaxDurationMs)
	}
	return nil
}

// videoTiming is the media timescale (units per second) and each frame's
// duration in those units: a DurationMs spread evenly over the frames
// (timescale 1000 per frame, so the sum is exact), or VideoFPS.
func videoTiming(m *trace.Media) (timescale, delta uint32) {
	if m.DurationMs > 0 {
		return 1000 * uint32(m.Frames), uint32(m.DurationMs)
	}
	return VideoFPS, 1
}

// appendVideo appends an MP4 file (ISO BMFF: ftyp, moov with one video
// track, mdat) of m.Frames frames of uniform random pixels, each a JPEG at
// JPEGQuality.
func appendVideo(dst []byte, m *trace.Media, r *rand.Rand, yield func()) ([]byte, error) {
	p := getPixels(4 * int(m.Width) * int(m.Height))
	defer putPixels(p)
	img := asRGBA(*p, m) // the JPEG encoder's fast path
	var frames bytes.Buffer
	sizes := make([]uint32, m.Frames)
	for i := range sizes {
		randomPixels(img.Pix, r, yield)
		n := frames.Len()
		if err := jpeg.Encode(yieldWriter{&frames, yield}, img, &jpeg.Options{Quality: JPEGQuality}); err != nil {
			return dst, fmt.Errorf("video frame %d: %w", i, err)
		}
		sizes[i] = uint32(frames.Len() - n)
	}
	start := len(dst)
	dst = box(dst, "ftyp", func(b []byte) []byte {
		b = append(b, "isom"...)
		b = be32(b, 0x200)
		return append(b, "isomiso2mp41"...)
	})
	// The one chunk's offset is where the frames start: after moov and
	// mdat's 16-byte header. moov's size does not depend on the offset's
	// value, so it is written once with 0 and patched.
	dst = appendMoov(dst, m, sizes)
	off := uint64(len(dst)-start) + 16
	binary.BigEndian.PutUint64(dst[len(dst)-8:], off) // co64's entry is moov's last 8 bytes
	dst = be32(dst, 1)                                // size 1: a 64-bit size follows
	dst = append(dst, "mdat"...)
	dst = binary.BigEndian.AppendUint64(dst, 16+uint64(frames.Len()))
	return append(dst, frames.Bytes()...), nil
}

// appendMoov appends the movie box of one Motion JPEG track whose samples
// are one chunk; its last 8 bytes are that chunk's offset, to be patched.
func appendMoov(dst []byte, m *trace.Media, sizes []uint32) []byte {
	timescale, delta := videoTiming(m)
	mediaDur := uint64(delta) * uint64(len(sizes))
	movieDur := uint32(mediaDur * 1000 / uint64(timescale)) // in mvhd's timescale, ms
	w, h := uint32(m.Width), uint32(m.Height)
	return box(dst, "moov", func(b []byte) []byte {
		b = fullBox(b, "mvhd", 0, 0, func(b []byte) []byte {
			b = be32(be32(b, 0), 0) // creation, modification
			b = be32(be32(b, 1000), movieDur)
			b = be32(b, 0x00010000)            // rate 1.0
			b = append(b, 0x01, 0x00)          // volume 1.0
			b = append(b, make([]byte, 10)...) // reserved
			b = matrix(b)                      // identity
			b = append(b, make([]byte, 24)...) // pre_defined
			return be32(b, 2)                  // next track id
		})
		return box(b, "trak", func(b []byte) []byte {
			b = fullBox(b, "tkhd", 0, 3, func(b []byte) []byte { // enabled, in movie
				b = be32(be32(b, 0), 0)
				b = be32(be32(b, 1), 0) // track 1, reserved
				b = be32(b, movieDur)
				b = append(b, make([]byte, 8)...) // reserved
				b = append(b, make([]byte, 8)...) // layer, alternate group, volume, reserved
				b = matrix(b)
				return be32(be32(b, w<<16), h<<16)
			})
			return box(b, "mdia", func(b []byte) []byte {
				b = fullBox(b, "mdhd", 0, 0, func(b []byte) []byte {
					b = be32(be32(b, 0), 0)
					b = be32(be32(b, timescale), uint32(mediaDur))
					return append(b, 0x55, 0xc4, 0, 0) // language "und", pre_defined
				})
				b = fullBox(b, "hdlr", 0, 0, func(b []byte) []byte {
					b = be32(b, 0)
					b = append(b, "vide"...)
					b = append(b, make([]byte, 12)...)
					return append(b, "VideoHandler\x00"...)
				})
				return box(b, "minf", func(b []byte) []byte {
					b = fullBox(b, "vmhd", 0, 1, func(b []byte) []byte { return append(b, make([]byte, 8)...) })
					b = box(b, "dinf", func(b []byte) []byte {
						return fullBox(b, "dref", 0, 0, func(b []byte) []byte {
							b = be32(b, 1)
							return fullBox(b, "url ", 0, 1, func(b []byte) []byte { return b }) // in this file
						})
					})
					return box(b, "stbl", func(b []byte) []byte {
						b = fullBox(b, "stsd", 0, 0, func(b []byte) []byte {
							b = be32(b, 1)
							return box(b, videoCodec, func(b []byte) []byte {
								b = append(b, make([]byte, 6)...) // reserved
								b = append(b, 0, 1)               // data reference 1
								b = append(b, make([]byte, 16)...)
								b = append(b, byte(w>>8), byte(w), byte(h>>8), byte(h))
								b = be32(be32(b, 0x00480000), 0x00480000) // 72 dpi
								b = be32(b, 0)
								b = append(b, 0, 1) // frames per sample
								name := make([]byte, 32)
								name[0] = byte(copy(name[1:], "Photo - JPEG"))
								b = append(b, name...)
								return append(b, 0, 0x18, 0xff, 0xff) // depth 24, pre_defined -1
							})
						})
						b = fullBox(b, "stts", 0, 0, func(b []byte) []byte {
							return be32(be32(be32(b, 1), uint32(len(sizes))), delta)
						})
						b = fullBox(b, "stsc", 0, 0, func(b []byte) []byte {
							return be32(be32(be32(be32(b, 1), 1), uint32(len(sizes))), 1)
						})
						b = fullBox(b, "stsz", 0, 0, func(b []byte) []byte {
							b = be32(be32(b, 0), uint32(len(sizes)))
							for _, s := range sizes {
								b = be32(b, s)
							}
							return b
						})
						return fullBox(b, "co64", 0, 0, func(b []byte) []byte {
							return binary.BigEndian.AppendUint64(be32(b, 1), 0)
						})
					})
				})
			})
		})
	})
}

func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// box appends a box of type typ whose content body appends, with its size.
func box(b []byte, typ string, body func([]byte) []byte) []byte {
	at := len(b)
	b = append(be32(b, 0), typ...)
	b = body(b)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at))
	return b
}

// fullBox appends a box with a version and flags.
func fullBox(b []byte, typ string, version byte, flags uint32, body func([]byte) []byte) []byte {
	return box(b, typ, func(b []byte) []byte {
		return body(be32(b, uint32(version)<<24|flags))
	})
}

// matrix appends the identity transformation matrix.
func matrix(b []byte) []byte {
	for _, v := range []uint32{0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000} {
		b = be32(b, v)
	}
	return b
}
