package media

import (
	"fmt"
	"math"

	"github.com/tracekit/tracekit/trace"
)

// The prompt tokens a media item takes follow one documented model family
// per kind, with the numbers of its processors' source:
//
// Images and video: Qwen2-VL / Qwen2.5-VL (transformers' Qwen2VLImageProcessor
// and Qwen2VLVideoProcessor). Each side is resized by smart_resize to a
// multiple of 28 pixels (patch 14 x merge 2): rounded to the nearest
// multiple (half to even, as Python's round), then, if the area is above
// the maximum, both sides scaled by sqrt(area/max) and floored to
// multiples of 28 (at least 28); if below the minimum, scaled up by
// sqrt(min/area) and ceiled. An image is one temporal slice of
// (h'/28)*(w'/28) tokens. A video is one slice per 2 frames (an odd count
// padded with its last frame) of its frames as the server samples them:
// vLLM's video loader takes at most VideoSampledFrames frames, spread
// evenly. The vision start/end marker tokens around each item are the
// chat template's, like the role markers the mock does not count either.
//
// Audio: Qwen2-Audio (transformers' Qwen2AudioProcessor over Whisper's
// feature extractor): 16 kHz audio, one mel frame per 160 samples (10 ms),
// cut at Whisper's 30 s window (3,000 frames); the encoder's stride-2
// convolution and stride-2 pooling leave ((L-1)/2+1-2)/2+1 tokens for L
// frames: 25 a second, 750 for 30 s.
const (
	TokenPatch = 28 // pixels per token side: patch 14 x spatial merge 2

	ImageMinPixels = 56 * 56        // Qwen2VLImageProcessor's min_pixels: 3,136
	ImageMaxPixels = 28 * 28 * 1280 // its max_pixels: 1,003,520
	VideoMinPixels = 128 * 28 * 28  // Qwen2VLVideoProcessor's min_pixels: 100,352
	VideoMaxPixels = 28 * 28 * 768  // its max_pixels: 602,112
	VideoTemporal  = 2              // frames per temporal slice (temporal_patch_size)
	// VideoSampledFrames is how many frames of a video vLLM's video loader
	// passes on (VideoMediaIO's num_frames default): all of a shorter one.
	VideoSampledFrames = 32
	MaxAspectRatio     = 200 // smart_resize refuses a longer side over 200 times the shorter

	AudioTokenRate    = 16000 // Hz the audio is resampled to
	AudioHop          = 160   // samples per mel frame
	AudioMaxMelFrames = 3000  // Whisper's 30 s window
)

// SmartResize is Qwen2-VL's smart_resize: the size an image or video
// frame of h x w is resized to before its patches are cut, for the given
// pixel bounds.
func SmartResize(h, w, minPixels, maxPixels int) (int, int, error) {
	if h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("size %dx%d: want positive sides", w, h)
	}
	if float64(max(h, w))/float64(min(h, w)) > MaxAspectRatio {
		return 0, 0, fmt.Errorf("size %dx%d: absolute aspect ratio must be smaller than %d", w, h, MaxAspectRatio)
	}
	const f = TokenPatch
	hb := int(math.RoundToEven(float64(h)/f)) * f
	wb := int(math.RoundToEven(float64(w)/f)) * f
	switch {
	case hb*wb > maxPixels:
		beta := math.Sqrt(float64(h) * float64(w) / float64(maxPixels))
		hb = max(f, int(math.Floor(float64(h)/beta/f))*f)
		wb = max(f, int(math.Floor(float64(w)/beta/f))*f)
	case hb*wb < minPixels:
		beta := math.Sqrt(float64(minPixels) / (float64(h) * float64(w)))
		hb = int(math.Ceil(float64(h)*beta/f)) * f
		wb = int(math.Ceil(float64(w)*beta/f)) * f
	}
	return hb, wb, nil
}

// Tokens is how many prompt tokens the item info describes takes (see the
// constants for the model families and their rules).
func Tokens(info Info) (int, error) {
	switch info.Kind {
	case trace.MediaImage:
		h, w, err := SmartResize(info.Height, info.Width, ImageMinPixels, ImageMaxPixels)
		if err != nil {
			return 0, err
		}
		return (h / TokenPatch) * (w / TokenPatch), nil
	case trace.MediaVideo:
		h, w, err := SmartResize(info.Height, info.Width, VideoMinPixels, VideoMaxPixels)
		if err != nil {
			return 0, err
		}
		frames := min(info.Frames, VideoSampledFrames)
		slices := (frames + VideoTemporal - 1) / VideoTemporal
		return slices * (h / TokenPatch) * (w / TokenPatch), nil
	case trace.MediaAudio:
		if info.SampleRate <= 0 {
			return 0, fmt.Errorf("audio at %d Hz: want a positive rate", info.SampleRate)
		}
		// Resampled to 16 kHz, then one frame per hop started (Whisper's
		// attention mask takes every 160th sample of the padded clip).
		n := (info.Samples*AudioTokenRate + int64(info.SampleRate) - 1) / int64(info.SampleRate)
		frames := min((n+AudioHop-1)/AudioHop, AudioMaxMelFrames)
		return AudioTokensFromFrames(int(frames)), nil
	}
	return 0, fmt.Errorf("media kind %q: want image, video or audio", info.Kind)
}

// AudioTokensFromFrames is Qwen2-Audio's encoder output length for L mel
// frames: ((L-1)//2+1-2)//2+1 with Python's floor division, at least 0.
func AudioTokensFromFrames(l int) int {
	if l <= 0 {
		return 0
	}
	conv := (l-1)/2 + 1
	if conv < 2 {
		return 0 // (conv-2)//2+1 floors to 0 for conv of 1
	}
	return (conv-2)/2 + 1
}
