package analyze

import (
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// Speech-to-text (transcriptions, translations): a request uploads an
// audio clip, so besides its tokens an endpoint of these counts the audio
// it had transcribed. The clip's length is the recording's audio_ms (the
// trace item's own, whatever its sample rate and channels); a recording
// written before that column gives it by media_bytes (replay sent the
// 16 kHz 16-bit mono WAV clips internal/media makes, whose size fixes
// their length). Its figure is audio seconds per
// second of the run's wall time, as vLLM's benchmark (input audio
// duration) and AIPerf report it: above 1, the server transcribes faster
// than real time.

// AudioStats are a speech-to-text endpoint's audio figures, over its
// completed requests (streamed or not).
type AudioStats struct {
	// Seconds is the audio transcribed: the completed requests' clips.
	Seconds float64 `json:"seconds"`
	// PerSecond is Seconds per second of the run's Duration.
	PerSecond float64 `json:"per_s"`
	// MeanClip is the mean clip, in seconds.
	MeanClip float64 `json:"mean_clip_seconds"`
	clips    int
}

// speechEndpoint reports whether requests to ep upload audio to transcribe.
func speechEndpoint(ep string) bool {
	return ep == trace.EndpointTranscriptions || ep == trace.EndpointTranslations
}

// audioSeconds is the audio a speech-to-text request sent, 0 for others.
func audioSeconds(r *trace.Record, ep string) float64 {
	switch {
	case !speechEndpoint(ep) || r.MediaItems <= 0:
		return 0
	case r.AudioMs > 0:
		return float64(r.AudioMs) / 1e3
	}
	return media.WAVSeconds(r.MediaBytes, r.MediaItems)
}

// addAudio counts a completed request's clip.
func (g *GenerationStats) addAudio(q *Request) {
	if !speechEndpoint(q.Endpoint) {
		return
	}
	if g.Audio == nil {
		g.Audio = &AudioStats{}
	}
	g.Audio.Seconds += q.AudioSeconds
	g.Audio.clips++
}

// finishAudio computes the rates once the endpoint's requests are counted.
func (g *GenerationStats) finishAudio(duration float64) {
	if a := g.Audio; a != nil {
		a.PerSecond = ratio(a.Seconds, duration)
		a.MeanClip = ratio(a.Seconds, float64(a.clips))
	}
}
