package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/fnv1a"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/trace"
)

// Size is an image's or a video frame's width and height in pixels.
type Size struct{ W, H int32 }

func (s Size) String() string { return fmt.Sprintf("%dx%d", s.W, s.H) }

// ParseSizes reads a comma-separated list of WxH sizes ("1024x1024" or
// "512x512,1280x720").
func ParseSizes(spec string) ([]Size, error) {
	var out []Size
	for _, part := range strings.Split(spec, ",") {
		w, h, ok := strings.Cut(strings.TrimSpace(part), "x")
		wi, werr := strconv.ParseInt(w, 10, 32)
		hi, herr := strconv.ParseInt(h, 10, 32)
		if !ok || werr != nil || herr != nil || wi <= 0 || hi <= 0 {
			return nil, fmt.Errorf("%q: want WIDTHxHEIGHT in pixels, e.g. 1024x1024", part)
		}
		out = append(out, Size{int32(wi), int32(hi)})
	}
	return out, nil
}

// MediaOptions are the media items a job puts on each turn's user message
// (trace.Message.Media, virtual: a seed and a shape), after its text:
// images, then a video, then an audio clip. A nil Dist adds none.
type MediaOptions struct {
	Images      Dist   // images per request
	ImageSizes  []Size // each image's size, drawn uniformly from the list
	ImageFormat string // png or jpeg
	// Videos is the videos per request, each VideoFrames frames of
	// VideoSize, as vLLM's random-mm makes them (mp4).
	Videos      Dist
	VideoSize   Size
	VideoFrames int32
	// AudioSeconds is the length of the one audio clip (WAV) of each
	// request, in seconds; a draw under a millisecond adds none.
	AudioSeconds Dist
	// RandomMM, when not nil, draws each request's images and videos as
	// vLLM's random-mm dataset does, instead of Images and Videos.
	RandomMM *RandomMM
}

// Check refuses a shape internal/media would refuse to make, naming the
// flag (--image-size, --video-size, --video-frames), before any work.
func (o *MediaOptions) Check() error {
	for _, s := range o.ImageSizes {
		m := trace.Media{Kind: trace.MediaImage, Format: o.ImageFormat, Width: s.W, Height: s.H}
		if err := media.Check(&m); err != nil {
			return fmt.Errorf("--image-size %s: %w", s, err)
		}
	}
	if o.Videos != nil {
		if err := checkVideo(o.VideoSize, o.VideoFrames); err != nil {
			return err
		}
	}
	if o.RandomMM != nil {
		for _, b := range o.RandomMM.Buckets {
			m := trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: b.W, Height: b.H}
			err := media.Check(&m)
			if b.Frames > 1 {
				err = checkVideo(Size{b.W, b.H}, b.Frames)
			}
			if err != nil {
				return fmt.Errorf("--random-mm-bucket-config (%d, %d, %d): %w", b.H, b.W, b.Frames, err)
			}
		}
	}
	return nil
}

// checkVideo bounds a video's shape as media bounds an image's.
func checkVideo(s Size, frames int32) error {
	if s.W <= 0 || s.H <= 0 || int64(s.W)*int64(s.H) > media.MaxPixels {
		return fmt.Errorf("--video-size %s: want positive sides of at most %d pixels in all", s, media.MaxPixels)
	}
	if frames <= 0 || frames > media.MaxFrames {
		return fmt.Errorf("--video-frames %d: want 1 to %d", frames, media.MaxFrames)
	}
	return nil
}

// Kinds lists the media kinds o can put on a request.
func (o *MediaOptions) Kinds() []string {
	var k []string
	if o.Images != nil || o.RandomMM != nil && o.RandomMM.Limits[trace.MediaImage] > 0 {
		k = append(k, trace.MediaImage)
	}
	if o.Videos != nil || o.RandomMM != nil && o.RandomMM.Limits[trace.MediaVideo] > 0 {
		k = append(k, trace.MediaVideo)
	}
	if o.AudioSeconds != nil {
		k = append(k, trace.MediaAudio)
	}
	return k
}

// mediaSalt keeps media draws apart from the reasoning draws of the
// same conversation.
const mediaSalt = 0x6d65646961 // "media"

// apply puts media on the user message of each turn of c (the last
// message of role user; a turn with none, such as an agent's tool round,
// gets none). The draws of a conversation come from a generator seeded by
// the trace's seed and the conversation's id, so they do not depend on
// the order conversations are written in.
func (o *MediaOptions) apply(c Conversation, seed int64) {
	if len(c) == 0 {
		return
	}
	r := rand.New(rand.NewPCG(uint64(seed)^mediaSalt, fnv1a.String(c[0].ConversationID)))
	for k := range c {
		j := -1
		for i := range c[k].Messages {
			if c[k].Messages[i].Role == "user" {
				j = i
			}
		}
		if j < 0 {
			continue
		}
		items := o.draw(r)
		if len(items) == 0 {
			continue
		}
		msgs := append([]trace.Message(nil), c[k].Messages...)
		// after the items the source put there (a dataset's images)
		msgs[j].Media = append(append([]trace.Media(nil), msgs[j].Media...), items...)
		c[k].Messages = msgs
	}
}

// draw is one request's media items.
func (o *MediaOptions) draw(r *rand.Rand) []trace.Media {
	var items []trace.Media
	if o.RandomMM != nil {
		items = o.RandomMM.draw(r)
	}
	if o.Images != nil {
		for range sampleInt(o.Images, r) {
			s := o.ImageSizes[r.IntN(len(o.ImageSizes))]
			items = append(items, trace.Media{Kind: trace.MediaImage, Format: o.ImageFormat, Width: s.W, Height: s.H, Seed: r.Int64()})
		}
	}
	if o.Videos != nil {
		for range sampleInt(o.Videos, r) {
			items = append(items, trace.Media{Kind: trace.MediaVideo, Format: "mp4", Width: o.VideoSize.W, Height: o.VideoSize.H,
				Frames: o.VideoFrames, Seed: r.Int64()})
		}
	}
	if o.AudioSeconds != nil {
		ms := math.Round(o.AudioSeconds.Sample(r) * 1000)
		if ms >= 1 {
			items = append(items, trace.Media{Kind: trace.MediaAudio, Format: "wav",
				DurationMs: int32(min(ms, media.MaxDurationMs)), Seed: r.Int64()})
		}
	}
	return items
}
