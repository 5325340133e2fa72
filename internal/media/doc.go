// Package media makes the bytes of a trace's virtual media items: images,
// video and audio clips described by their shape and a seed
// (trace.Media), the same bytes on every call.
//
// In: a trace.Media. Out: its encoded bytes (Make), appended to a buffer
// the caller reuses.
//
// What is made, and whose choice it follows:
//   - images: independent uniform random RGB pixels, as vLLM's random-mm
//     dataset makes them (the worst case for compression, so an image's
//     size and decode cost do not depend on what it shows), encoded as PNG
//     or as JPEG at JPEGQuality;
//   - audio: 16-bit mono PCM WAV at AudioRate Hz of Gaussian noise with
//     standard deviation 0.3 of full scale, clipped, as AIPerf makes it.
package media
