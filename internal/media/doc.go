// Package media makes the bytes of a trace's virtual media items: images,
// video and audio clips described by their shape and a seed
// (trace.Media), the same bytes on every call; and reads what a server
// reads of such bytes: their shape, and the prompt tokens they take.
//
// In: a trace.Media (Make), or an item's bytes (Probe). Out: its encoded
// bytes, appended to a buffer the caller reuses; an Info of its kind,
// format and shape, or an error saying why a server could not open it;
// its prompt tokens (Tokens, after one documented model family per kind:
// see tokens.go).
//
// What is made, and whose choice it follows:
//   - images: independent uniform random RGB pixels, as vLLM's random-mm
//     dataset makes them (the worst case for compression, so an image's
//     size and decode cost do not depend on what it shows), encoded as PNG
//     or as JPEG at JPEGQuality;
//   - video: MP4 files of frames of such pixels, at VideoFPS or over the
//     item's duration, as Motion JPEG (one JPEG per frame: writable with
//     the standard library, and read by ffmpeg and what is built on it);
//   - audio: 16-bit mono PCM WAV at AudioRate Hz of Gaussian noise with
//     standard deviation 0.3 of full scale, clipped, as AIPerf makes it.
package media
