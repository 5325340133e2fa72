package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// vLLM random-mm's defaults (vllm/benchmarks/datasets.py,
// RandomMultiModalDataset).
const (
	DefaultRandomMMLimit   = `{"image": 255, "video": 1}`
	DefaultRandomMMBuckets = `{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}`
)

// Bucket is one entry of vLLM random-mm's bucket config: an item of
// height H and width W, an image when Frames is 1, else a video of that
// many frames, drawn with probability P.
type Bucket struct {
	H, W, Frames int32
	P            float64
}

func (b Bucket) kind() string {
	if b.Frames == 1 {
		return trace.MediaImage
	}
	return trace.MediaVideo
}

// RandomMM is vLLM random-mm's item sampling: each request draws a count
// uniform in [Min, Max], then that many items from Buckets (normalized
// probabilities), a modality whose Limits count is reached dropping out
// and the others renormalized, as vLLM's get_mm_item_iterator does.
type RandomMM struct {
	Min, Max int
	Limits   map[string]int
	Buckets  []Bucket // zero-probability buckets removed, Ps summing to 1
}

// NewRandomMM applies vLLM's get_mm_item_sampling_params: base items per
// request n and range ratio r give counts in [max(0, floor(n(1-r))),
// min(sum of the limits of the modalities the buckets hold,
// ceil(n(1+r)))].
func NewRandomMM(base int, ratio float64, limits map[string]int, buckets []Bucket) (*RandomMM, error) {
	if !(ratio >= 0 && ratio <= 1) {
		return nil, fmt.Errorf("--random-mm-num-mm-items-range-ratio %g: want 0 to 1", ratio)
	}
	if base < 0 {
		return nil, fmt.Errorf("--random-mm-base-items-per-request %d: want 0 or more", base)
	}
	total := 0.0
	var kept []Bucket
	for _, b := range buckets {
		switch {
		case b.P < 0:
			return nil, fmt.Errorf("--random-mm-bucket-config: bucket (%d, %d, %d) has probability %g: want 0 or more", b.H, b.W, b.Frames, b.P)
		case b.Frames < 1:
			return nil, fmt.Errorf("--random-mm-bucket-config: bucket (%d, %d, %d): want 1 frame (an image) or more (a video)", b.H, b.W, b.Frames)
		}
		if _, ok := limits[b.kind()]; !ok {
			return nil, fmt.Errorf("--random-mm-bucket-config: bucket (%d, %d, %d) is a %s, which --random-mm-limit-mm-per-prompt has no limit for", b.H, b.W, b.Frames, b.kind())
		}
		if b.P > 0 {
			kept = append(kept, b)
			total += b.P
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("--random-mm-bucket-config: no bucket has a probability above 0")
	}
	for i := range kept {
		kept[i].P /= total
	}
	used := map[string]int{}
	sum := 0
	for _, b := range kept {
		if _, ok := used[b.kind()]; !ok {
			used[b.kind()] = limits[b.kind()]
			sum += limits[b.kind()]
		}
	}
	m := &RandomMM{Limits: used, Buckets: kept,
		Min: max(0, int(math.Floor(float64(base)*(1-ratio)))),
		Max: min(sum, int(math.Ceil(float64(base)*(1+ratio))))}
	if m.Min > m.Max {
		return nil, fmt.Errorf("random-mm: at least %d items per request, but at most %d (the limits per prompt)", m.Min, m.Max)
	}
	return m, nil
}

// draw is one request's items, their seeds from r.
func (m *RandomMM) draw(r *rand.Rand) []trace.Media {
	n := m.Min + r.IntN(m.Max-m.Min+1)
	if n == 0 {
		return nil
	}
	ps := make([]float64, len(m.Buckets))
	for i, b := range m.Buckets {
		ps[i] = b.P
	}
	count := map[string]int{}
	var items []trace.Media
	for len(items) < n {
		b := m.Buckets[pick(ps, r)]
		k := b.kind()
		if count[k] < m.Limits[k] {
			count[k]++
			it := trace.Media{Kind: k, Format: "jpeg", Width: b.W, Height: b.H, Seed: r.Int64()}
			if k == trace.MediaVideo {
				it.Format, it.Frames = "mp4", b.Frames
			}
			items = append(items, it)
			continue
		}
		// the modality is full: its buckets drop out, the rest renormalize
		left := 0.0
		for i, b := range m.Buckets {
			if b.kind() == k {
				ps[i] = 0
			}
			left += ps[i]
		}
		if left == 0 {
			break
		}
		for i := range ps {
			ps[i] /= left
		}
	}
	return items
}

// pick draws an index with probabilities ps (summing to 1).
func pick(ps []float64, r *rand.Rand) int {
	u, last := r.Float64(), 0
	for i, p := range ps {
		if p > 0 {
			last = i
		}
		if u < p {
			return i
		}
		u -= p
	}
	return last // rounding left u just above the sum
}

// ParseMMLimits reads --random-mm-limit-mm-per-prompt: a JSON or Python
// dict of modality to count, e.g. {"image": 3, "video": 0}.
func ParseMMLimits(s string) (map[string]int, error) {
	p := &pyParser{s: s}
	out := map[string]int{}
	err := p.dict(func() error {
		k, err := p.str()
		if err != nil {
			return err
		}
		v, err := p.number()
		if err != nil {
			return err
		}
		if v < 0 || v != math.Trunc(v) || v > math.MaxInt32 {
			return fmt.Errorf("limit of %q is %v: want a whole number, 0 or more", k, v)
		}
		if k != trace.MediaImage && k != trace.MediaVideo && k != trace.MediaAudio {
			return fmt.Errorf("modality %q: want image or video", k)
		}
		out[k] = int(v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--random-mm-limit-mm-per-prompt %q: %w", s, err)
	}
	return out, nil
}

// ParseMMBuckets reads --random-mm-bucket-config: a Python dict literal
// of (height, width, frames) tuples to probabilities, as vLLM reads it.
func ParseMMBuckets(s string) ([]Bucket, error) {
	p := &pyParser{s: s}
	var out []Bucket
	err := p.dict(func() error {
		var t [3]int32
		if err := p.expect('('); err != nil {
			return err
		}
		for i := range t {
			if i > 0 {
				if err := p.expect(','); err != nil {
					return err
				}
			}
			v, err := p.number()
			if err != nil {
				return err
			}
			if v != math.Trunc(v) || v < 0 || v > math.MaxInt32 {
				return fmt.Errorf("%v in a bucket: want a whole number of pixels or frames", v)
			}
			t[i] = int32(v)
		}
		p.accept(',')
		if err := p.expect(')'); err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		v, err := p.number()
		if err != nil {
			return err
		}
		b := Bucket{H: t[0], W: t[1], Frames: t[2], P: v}
		if slices.ContainsFunc(out, func(o Bucket) bool { return o.H == b.H && o.W == b.W && o.Frames == b.Frames }) {
			return fmt.Errorf("bucket (%d, %d, %d) given twice", b.H, b.W, b.Frames)
		}
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--random-mm-bucket-config %q: %w", s, err)
	}
	return out, nil
}

// pyParser reads the Python literals vLLM's flags take: a dict of keys
// (strings, tuples) to numbers, "key: value" pairs.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) skip() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *pyParser) accept(c byte) bool {
	p.skip()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) expect(c byte) error {
	if !p.accept(c) {
		return fmt.Errorf("at byte %d: want %q", p.i, c)
	}
	return nil
}

// dict reads {entry: value, ...}, entry calling p.expect(':') itself
// after its key.
func (p *pyParser) dict(entry func() error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	for !p.accept('}') {
		if err := entry(); err != nil {
			return err
		}
		if !p.accept(',') {
			if err := p.expect('}'); err != nil {
				return err
			}
			break
		}
	}
	p.skip()
	if p.i != len(p.s) {
		return fmt.Errorf("at byte %d: text after the dict", p.i)
	}
	return nil
}

// str reads a quoted key and the ':' after it.
func (p *pyParser) str() (string, error) {
	p.skip()
	if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\'') {
		return "", fmt.Errorf("at byte %d: want a quoted modality", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("at byte %d: unterminated string", p.i)
	}
	k := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return k, p.expect(':')
}

// number reads a number.
func (p *pyParser) number() (float64, error) {
	p.skip()
	j := p.i
	for j < len(p.s) && strings.ContainsRune("0123456789+-.eE_", rune(p.s[j])) {
		j++
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(p.s[p.i:j], "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("at byte %d: want a number", p.i)
	}
	p.i = j
	return v, nil
}
