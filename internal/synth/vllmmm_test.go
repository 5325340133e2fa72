package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The counts and shapes random-mm draws, against what vLLM's
// get_mm_item_sampling_params and get_mm_item_iterator give, worked by
// hand for each configuration.
func TestRandomMMMatchesVLLM(t *testing.T) {
	type shape struct {
		kind         string
		w, h, frames int32
	}
	for _, c := range []struct {
		name            string
		base            int
		ratio           float64
		limits, buckets string
		min, max        int            // count range
		counts          map[int]bool   // every count that must occur
		maxOf           map[string]int // items of a kind per request, at most
		exactOf         map[string]int // items of a kind per request, exactly (limits saturate)
		shapes          map[shape]bool
	}{
		{
			// vLLM's defaults: n=1, r=0 -> [floor(1), min(255+1... only
			// image buckets have p > 0, so limits {image: 255}: min(255,
			// ceil(1))] = [1, 1]; (256,256,1) and (720,1280,1) at 1/2
			// each, the video bucket dropped (p 0). (h, w) is height then
			// width: 720x1280 is 1280 wide.
			name: "defaults", base: 1, limits: DefaultRandomMMLimit, buckets: DefaultRandomMMBuckets,
			min: 1, max: 1, counts: map[int]bool{1: true},
			maxOf:  map[string]int{trace.MediaImage: 1, trace.MediaVideo: 0},
			shapes: map[shape]bool{{trace.MediaImage, 256, 256, 0}: true, {trace.MediaImage, 1280, 720, 0}: true},
		},
		{
			// n=2, r=0.5: [floor(1), min(2+1, ceil(3))] = [1, 3], each
			// count 1/3.
			name: "range", base: 2, ratio: 0.5, limits: `{"image": 2, "video": 1}`,
			buckets: `{(256, 256, 1): 0.25, (64, 48, 8): 0.75}`,
			min:     1, max: 3, counts: map[int]bool{1: true, 2: true, 3: true},
			maxOf:  map[string]int{trace.MediaImage: 2, trace.MediaVideo: 1},
			shapes: map[shape]bool{{trace.MediaImage, 256, 256, 0}: true, {trace.MediaVideo, 48, 64, 8}: true},
		},
		{
			// n=3, r=0, limits image 1 video 2: [3, min(3, 3)] = [3, 3];
			// once a modality is full its buckets drop out, so every
			// request is exactly one image and two videos.
			name: "saturate", base: 3, limits: `{'image': 1, 'video': 2}`,
			buckets: `{(32, 32, 1): 9.0, (16, 16, 4): 1.0}`,
			min:     3, max: 3, counts: map[int]bool{3: true},
			exactOf: map[string]int{trace.MediaImage: 1, trace.MediaVideo: 2},
			shapes:  map[shape]bool{{trace.MediaImage, 32, 32, 0}: true, {trace.MediaVideo, 16, 16, 4}: true},
		},
		{
			// n=4, r=1: [floor(0), min(5, ceil(8))] = [0, 5]: r=1 allows
			// requests without items; the cap is the sum of the limits.
			name: "zero", base: 4, ratio: 1, limits: `{"image": 5, "video": 0}`,
			buckets: `{(8, 8, 1): 1}`,
			min:     0, max: 5, counts: map[int]bool{0: true, 5: true},
			maxOf:  map[string]int{trace.MediaImage: 5},
			shapes: map[shape]bool{{trace.MediaImage, 8, 8, 0}: true},
		},
	} {
		limits, err := ParseMMLimits(c.limits)
		if err != nil {
			t.Fatal(err)
		}
		buckets, err := ParseMMBuckets(c.buckets)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewRandomMM(c.base, c.ratio, limits, buckets)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Min != c.min || m.Max != c.max {
			t.Errorf("%s: counts in [%d, %d], want [%d, %d]", c.name, m.Min, m.Max, c.min, c.max)
		}
		r := rand.New(rand.NewPCG(1, 2))
		seen := map[int]int{}
		seenShape := map[shape]int{}
		const n = 3000
		for range n {
			items := m.draw(r)
			seen[len(items)]++
			of := map[string]int{}
			for _, it := range items {
				of[it.Kind]++
				s := shape{it.Kind, it.Width, it.Height, it.Frames}
				if !c.shapes[s] {
					t.Fatalf("%s: item %+v of no bucket", c.name, it)
				}
				seenShape[s]++
				if (it.Kind == trace.MediaImage) != (it.Format == "jpeg") || (it.Kind == trace.MediaVideo) != (it.Format == "mp4") {
					t.Fatalf("%s: item %+v: images are jpeg, videos mp4", c.name, it)
				}
			}
			for k, most := range c.maxOf {
				if of[k] > most {
					t.Fatalf("%s: %d items of %s, limit %d", c.name, of[k], k, most)
				}
			}
			for k, want := range c.exactOf {
				if of[k] != want {
					t.Fatalf("%s: %d items of %s, want %d", c.name, of[k], k, want)
				}
			}
		}
		for k := range seen {
			if k < c.min || k > c.max {
				t.Errorf("%s: a request of %d items", c.name, k)
			}
		}
		for k := range c.counts {
			if seen[k] == 0 {
				t.Errorf("%s: no request of %d items in %d", c.name, k, n)
			}
		}
		if c.name == "range" {
			for k := 1; k <= 3; k++ { // 1/3 each: 1000 of 3000, far from the bounds
				if seen[k] < 850 || seen[k] > 1150 {
					t.Errorf("range: %d requests of %d items, want about 1000", seen[k], k)
				}
			}
		}
		if c.name == "defaults" {
			a, b := seenShape[shape{trace.MediaImage, 256, 256, 0}], seenShape[shape{trace.MediaImage, 1280, 720, 0}]
			if a < 1350 || b < 1350 {
				t.Errorf("defaults: %d 256x256 and %d 1280x720 images, want about 1500 each", a, b)
			}
		}
	}
}

// vLLM's flags take Python literals; bad ones are refused naming the flag
// and the byte.
func TestRandomMMParse(t *testing.T) {
	b, err := ParseMMBuckets("{(256,256,1):0.5,\n (720, 1280, 16) : 1e-1,}")
	if err != nil || len(b) != 2 || b[1] != (Bucket{H: 720, W: 1280, Frames: 16, P: 0.1}) {
		t.Fatalf("%+v %v", b, err)
	}
	for _, bad := range []string{"", "{(1,2):1}", "{(1,2,3):1", "{(1,2,3):x}", "{(1,2,3):1} x", "{(1.5,2,3):1}", "{(1,2,3):1,(1,2,3):2}"} {
		if _, err := ParseMMBuckets(bad); err == nil {
			t.Errorf("bucket config %q accepted", bad)
		}
	}
	for _, bad := range []string{`{"image": -1}`, `{"sound": 1}`, `{image: 1}`, `{"image": 1.5}`} {
		if _, err := ParseMMLimits(bad); err == nil {
			t.Errorf("limits %q accepted", bad)
		}
	}
	if _, err := NewRandomMM(1, 0, map[string]int{"image": 1}, []Bucket{{1, 1, 8, 1}}); err == nil {
		t.Error("a video bucket without a video limit accepted")
	}
	if _, err := NewRandomMM(1, 1.5, map[string]int{"image": 1}, []Bucket{{1, 1, 1, 1}}); err == nil {
		t.Error("range ratio 1.5 accepted")
	}
	if _, err := NewRandomMM(5, 0, map[string]int{"image": 1}, []Bucket{{1, 1, 1, 1}}); err == nil {
		t.Error("5 items per request with a limit of 1 accepted")
	}
}
