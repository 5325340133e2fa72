package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // formats a server's image library opens
	_ "image/jpeg"
	_ "image/png"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// Info is what Probe reads of a media item's bytes.
type Info struct {
	Kind   string // trace.MediaImage, MediaVideo or MediaAudio
	Format string // png, jpeg, gif; mp4; wav
	// Width and Height are an image's or a video frame's size in pixels.
	Width, Height int
	// Frames is a video's frame count.
	Frames int
	// Duration is a video's or an audio clip's length.
	Duration time.Duration
	// Samples and SampleRate are an audio clip's length in samples per
	// channel and its rate in Hz.
	Samples    int64
	SampleRate int
}

// Probe reads kind, format and shape from a media item's bytes, telling
// what is wrong with bytes a server could not open. An image is decoded in
// full, not only its header: a server converts every image to pixels
// before its encoder sees it (vLLM opens it with PIL and converts it to
// RGB), so an image whose data is cut short fails there. A video's boxes
// are read and its samples checked to lie within the bytes; an audio
// clip's WAV header is read and its data checked to be all there.
func Probe(data []byte) (Info, error) { return probe(data, true) }

// ProbeHeader is Probe without decoding an image's pixels: its header
// alone gives its format and size, so an image whose data is cut short or
// damaged past its header passes. Video and audio are checked as Probe
// checks them.
func ProbeHeader(data []byte) (Info, error) { return probe(data, false) }

func probe(data []byte, pixels bool) (Info, error) {
	switch {
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WAVE":
		return probeWAV(data)
	case len(data) >= 8 && string(data[4:8]) == "ftyp":
		return probeMP4(data)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return Info{}, fmt.Errorf("not an image, video or audio clip this server reads (PNG, JPEG, GIF, MP4 or WAV): starts with % x", data[:min(len(data), 8)])
		}
		return Info{}, fmt.Errorf("%s image header: %w", format, err)
	}
	info := Info{Kind: trace.MediaImage, Format: format, Width: cfg.Width, Height: cfg.Height}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return info, fmt.Errorf("%s image of %dx%d: more than %d pixels", format, cfg.Width, cfg.Height, MaxPixels)
	}
	if !pixels {
		return info, nil
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return info, fmt.Errorf("%s image of %dx%d does not decode: %w", format, cfg.Width, cfg.Height, err)
	}
	return info, nil
}

// probeWAV reads a RIFF WAVE file's fmt and data chunks.
func probeWAV(data []byte) (Info, error) {
	info := Info{Kind: trace.MediaAudio, Format: "wav"}
	var blockAlign int
	haveFmt := false
	for off := 12; ; {
		if off+8 > len(data) {
			return info, errors.New("wav: no data chunk")
		}
		id, size := string(data[off:off+4]), int64(binary.LittleEndian.Uint32(data[off+4:]))
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 || int64(body)+16 > int64(len(data)) {
				return info, fmt.Errorf("wav: fmt chunk of %d bytes at byte %d, want at least 16", size, off)
			}
			channels := int(binary.LittleEndian.Uint16(data[body+2:]))
			info.SampleRate = int(binary.LittleEndian.Uint32(data[body+4:]))
			blockAlign = int(binary.LittleEndian.Uint16(data[body+12:]))
			if channels == 0 || info.SampleRate == 0 || blockAlign == 0 {
				return info, fmt.Errorf("wav: fmt chunk says %d channels at %d Hz, %d bytes per frame", channels, info.SampleRate, blockAlign)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return info, fmt.Errorf("wav: data chunk at byte %d before the fmt chunk", off)
			}
			if have := int64(len(data) - body); size > have {
				return info, fmt.Errorf("wav: data chunk says %d bytes, the file holds %d: cut short", size, have)
			}
			info.Samples = size / int64(blockAlign)
			info.Duration = time.Duration(info.Samples * int64(time.Second) / int64(info.SampleRate))
			return info, nil
		}
		off = body + int(size) + int(size&1) // chunks are padded to even sizes
		if off < body {
			return info, fmt.Errorf("wav: chunk %q at byte %d has a size out of range", id, off)
		}
	}
}

// mp4Box is one box found in an MP4 file: its type and content.
type mp4Box struct {
	typ  string
	at   int // the box's offset in the file
	body []byte
}

// mp4Boxes splits b (at offset base in the file) into its boxes.
func mp4Boxes(b []byte, base int) ([]mp4Box, error) {
	var out []mp4Box
	for off := 0; off < len(b); {
		if len(b)-off < 8 {
			return out, fmt.Errorf("mp4: %d stray bytes at byte %d", len(b)-off, base+off)
		}
		size, typ, hdr := uint64(binary.BigEndian.Uint32(b[off:])), string(b[off+4:off+8]), 8
		switch size {
		case 0: // to the end
			size = uint64(len(b) - off)
		case 1:
			if len(b)-off < 16 {
				return out, fmt.Errorf("mp4: box %q at byte %d: 64-bit size cut short", typ, base+off)
			}
			size, hdr = binary.BigEndian.Uint64(b[off+8:]), 16
		}
		if size < uint64(hdr) || size > uint64(len(b)-off) {
			return out, fmt.Errorf("mp4: box %q at byte %d says %d bytes, %d remain: cut short or corrupt", typ, base+off, size, len(b)-off)
		}
		out = append(out, mp4Box{typ, base + off, b[off+hdr : off+int(size)]})
		off += int(size)
	}
	return out, nil
}

// child finds the first box of type typ among the boxes of b.
func child(b mp4Box, typ string) (mp4Box, error) {
	kids, err := mp4Boxes(b.body, b.at+8)
	if err != nil {
		return mp4Box{}, err
	}
	for _, k := range kids {
		if k.typ == typ {
			return k, nil
		}
	}
	return mp4Box{}, fmt.Errorf("mp4: box %q at byte %d has no %q box", b.typ, b.at, typ)
}

// path follows a chain of child box types from b.
func path(b mp4Box, types ...string) (mp4Box, error) {
	var err error
	for _, t := range types {
		if b, err = child(b, t); err != nil {
			return b, err
		}
	}
	return b, nil
}

// probeMP4 reads the first video track of an MP4 (or QuickTime) file: its
// frame size and codec from the sample description, its frame count from
// the sample sizes, its duration from the media header, and checks every
// sample lies within the file.
func probeMP4(data []byte) (Info, error) {
	info := Info{Kind: trace.MediaVideo, Format: "mp4"}
	top, err := mp4Boxes(data, 0)
	if err != nil {
		return info, err
	}
	var moov *mp4Box
	for i := range top {
		if top[i].typ == "moov" {
			moov = &top[i]
		}
	}
	if moov == nil {
		return info, errors.New("mp4: no moov box")
	}
	traks, err := mp4Boxes(moov.body, moov.at+8)
	if err != nil {
		return info, err
	}
	for _, trak := range traks {
		if trak.typ != "trak" {
			continue
		}
		hdlr, err := path(trak, "mdia", "hdlr")
		if err != nil {
			return info, err
		}
		if len(hdlr.body) < 12 || string(hdlr.body[8:12]) != "vide" {
			continue
		}
		return info, probeTrack(data, trak, &info)
	}
	return info, errors.New("mp4: no video track")
}

func probeTrack(data []byte, trak mp4Box, info *Info) error {
	mdhd, err := path(trak, "mdia", "mdhd")
	if err != nil {
		return err
	}
	var timescale, duration uint64
	switch b := mdhd.body; {
	case len(b) >= 24 && b[0] == 0:
		timescale, duration = uint64(binary.BigEndian.Uint32(b[12:])), uint64(binary.BigEndian.Uint32(b[16:]))
	case len(b) >= 32 && b[0] == 1:
		timescale, duration = uint64(binary.BigEndian.Uint32(b[20:])), binary.BigEndian.Uint64(b[24:])
	default:
		return fmt.Errorf("mp4: mdhd box at byte %d is cut short", mdhd.at)
	}
	if timescale == 0 {
		return fmt.Errorf("mp4: mdhd box at byte %d has timescale 0", mdhd.at)
	}
	info.Duration = time.Duration(duration * uint64(time.Second) / timescale)
	stbl, err := path(trak, "mdia", "minf", "stbl")
	if err != nil {
		return err
	}
	stsd, err := child(stbl, "stsd")
	if err != nil {
		return err
	}
	if len(stsd.body) < 8+8+24+4 {
		return fmt.Errorf("mp4: stsd box at byte %d holds no video sample entry", stsd.at)
	}
	entry := stsd.body[8:] // after version, flags, entry count
	info.Width = int(binary.BigEndian.Uint16(entry[8+24:]))
	info.Height = int(binary.BigEndian.Uint16(entry[8+26:]))
	if info.Width == 0 || info.Height == 0 {
		return fmt.Errorf("mp4: sample entry %q at byte %d has frame size %dx%d", entry[4:8], stsd.at+16, info.Width, info.Height)
	}
	stsz, err := child(stbl, "stsz")
	if err != nil {
		return err
	}
	if len(stsz.body) < 12 {
		return fmt.Errorf("mp4: stsz box at byte %d is cut short", stsz.at)
	}
	fixed, n := binary.BigEndian.Uint32(stsz.body[4:]), int(binary.BigEndian.Uint32(stsz.body[8:]))
	if fixed == 0 && len(stsz.body) < 12+4*n {
		return fmt.Errorf("mp4: stsz box at byte %d lists %d samples but holds %d", stsz.at, n, (len(stsz.body)-12)/4)
	}
	if n == 0 {
		return errors.New("mp4: the video track has no frames")
	}
	info.Frames = n
	size := func(i int) uint64 {
		if fixed != 0 {
			return uint64(fixed)
		}
		return uint64(binary.BigEndian.Uint32(stsz.body[12+4*i:]))
	}
	return checkSamples(data, stbl, n, size)
}

// checkSamples checks every sample of a track lies within data, from the
// chunk offsets (stco or co64) and the sample-to-chunk table (stsc).
func checkSamples(data []byte, stbl mp4Box, n int, size func(int) uint64) error {
	var offsets []uint64
	if co, err := child(stbl, "stco"); err == nil {
		if len(co.body) < 8 {
			return fmt.Errorf("mp4: stco box at byte %d is cut short", co.at)
		}
		k := int(binary.BigEndian.Uint32(co.body[4:]))
		if len(co.body) < 8+4*k {
			return fmt.Errorf("mp4: stco box at byte %d lists %d chunks but holds fewer", co.at, k)
		}
		for i := range k {
			offsets = append(offsets, uint64(binary.BigEndian.Uint32(co.body[8+4*i:])))
		}
	} else if co, err := child(stbl, "co64"); err == nil {
		if len(co.body) < 8 {
			return fmt.Errorf("mp4: co64 box at byte %d is cut short", co.at)
		}
		k := int(binary.BigEndian.Uint32(co.body[4:]))
		if len(co.body) < 8+8*k {
			return fmt.Errorf("mp4: co64 box at byte %d lists %d chunks but holds fewer", co.at, k)
		}
		for i := range k {
			offsets = append(offsets, binary.BigEndian.Uint64(co.body[8+8*i:]))
		}
	} else {
		return errors.New("mp4: the video track has no chunk offsets (stco or co64)")
	}
	stsc, err := child(stbl, "stsc")
	if err != nil {
		return err
	}
	if len(stsc.body) < 8 {
		return fmt.Errorf("mp4: stsc box at byte %d is cut short", stsc.at)
	}
	runs := int(binary.BigEndian.Uint32(stsc.body[4:]))
	if runs == 0 || len(stsc.body) < 8+12*runs {
		return fmt.Errorf("mp4: stsc box at byte %d lists %d runs but holds %d", stsc.at, runs, (len(stsc.body)-8)/12)
	}
	sample := 0
	for r := 0; r < runs && sample < n; r++ {
		first := int(binary.BigEndian.Uint32(stsc.body[8+12*r:])) - 1
		per := int(binary.BigEndian.Uint32(stsc.body[12+12*r:]))
		last := len(offsets)
		if r+1 < runs {
			last = int(binary.BigEndian.Uint32(stsc.body[8+12*(r+1):])) - 1
		}
		if first < 0 || last > len(offsets) || per == 0 {
			return fmt.Errorf("mp4: stsc run %d names chunks %d to %d of %d", r, first+1, last, len(offsets))
		}
		for c := first; c < last && sample < n; c++ {
			at := offsets[c]
			for range per {
				if sample == n {
					break
				}
				end := at + size(sample)
				if end > uint64(len(data)) || end < at {
					return fmt.Errorf("mp4: frame %d lies at bytes %d to %d of a file of %d: cut short", sample, at, end, len(data))
				}
				at, sample = end, sample+1
			}
		}
	}
	if sample < n {
		return fmt.Errorf("mp4: the chunks hold %d of the %d frames", sample, n)
	}
	return nil
}
