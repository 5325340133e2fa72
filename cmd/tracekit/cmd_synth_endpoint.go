package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/trace"
)

// The flags of the non-generating APIs' requests, by endpoint.
var (
	embeddingsFlags = []string{"batch-size", "input-tokens"}
	rankingFlags    = []string{"documents", "query-tokens", "document-tokens"}
	// poolingFlags are what a source of embeddings, rerank or score
	// requests reads besides the common and schedule flags.
	poolingFlags = []string{"conversations", "text-file", "endpoint"}
	// conversationFlags shape conversations: a single request of a
	// non-generating API has none of them.
	conversationFlags = []string{"turns", "think-time", "output-tokens", "prefix-tokens", "common-prefix-tokens", "config", "prefix-layout"}
)

// pooling reports whether --endpoint names an API that generates nothing
// (embeddings, rerank, score).
func (o *synthOptions) pooling() bool { return o.endpoint != "" && !trace.Generates(o.endpoint) }

// checkEndpoint refuses, all at once, the flags that make no sense with
// --endpoint (or without it) for source name.
func (o *synthOptions) checkEndpoint(name string) error {
	f := o.flags
	ep := o.endpoint
	if f.Changed("endpoint") && !trace.KnownEndpoint(ep) {
		return fmt.Errorf("--endpoint %q: want one of %s", ep, strings.Join(trace.Endpoints, ", "))
	}
	var bad []string
	given := func(names ...string) []string {
		var g []string
		for _, n := range names {
			if f.Changed(n) {
				g = append(g, "--"+n)
			}
		}
		return g
	}
	if g := given("batch-size"); len(g) > 0 && ep != trace.EndpointEmbeddings {
		bad = append(bad, "--batch-size: inputs per request of --endpoint embeddings only")
	}
	if g := given(rankingFlags...); len(g) > 0 && ep != trace.EndpointRerank && ep != trace.EndpointScore {
		bad = append(bad, strings.Join(g, ", ")+": shape requests of --endpoint rerank or score only")
	}
	speech := ep == trace.EndpointTranscriptions || ep == trace.EndpointTranslations
	if speech && !f.Changed("audio-seconds") {
		bad = append(bad, "--endpoint "+ep+" uploads an audio clip per request: give --audio-seconds (its text prompt is optional)")
	}
	if speech && name == "agent" {
		bad = append(bad, "--agent with --endpoint "+ep+": a transcription carries no tools or tool calls")
	}
	if f.Changed("reasoning-tokens") && (o.pooling() || ep == trace.EndpointCompletions || speech) {
		bad = append(bad, "--reasoning-tokens: --endpoint "+ep+" streams no reasoning (use chat, responses or messages)")
	}
	for _, m := range []struct{ flag, kind string }{{"images", trace.MediaImage}, {"videos", trace.MediaVideo}, {"audio-seconds", trace.MediaAudio}} {
		if f.Changed(m.flag) && !trace.CarriesMedia(ep, m.kind) {
			bad = append(bad, fmt.Sprintf("--%s: --endpoint %s carries no %s (chat carries images, video and audio; responses and messages images only; transcriptions and translations audio only)", m.flag, ep, m.kind))
		}
	}
	if o.pooling() {
		switch {
		case name == "agent":
			bad = append(bad, "--agent: agent sessions generate answers and tool calls, which --endpoint "+ep+" does not")
		case name != "synthetic":
			bad = append(bad, fmt.Sprintf("--source %s: --endpoint %s makes synthetic requests of corpus text only (leave --source out)", name, ep))
		}
		var conv []string
		for _, n := range conversationFlags {
			if !f.Changed(n) {
				continue
			}
			if n == "turns" {
				if d, err := synth.ParseDist(o.turns, synth.Count); err == nil && d.String() == (synth.Constant{V: 1}).String() {
					continue // one turn is what these requests are
				}
			}
			conv = append(conv, "--"+n)
		}
		if len(conv) > 0 {
			bad = append(bad, strings.Join(conv, ", ")+": --endpoint "+ep+" sends single requests (conversations of one turn, nothing generated)")
		}
		if ep != trace.EndpointEmbeddings && f.Changed("input-tokens") {
			bad = append(bad, "--input-tokens: --endpoint "+ep+" takes --query-tokens and --document-tokens")
		}
	} else if ep == trace.EndpointCompletions && name == "agent" {
		bad = append(bad, "--agent with --endpoint completions: the completions API carries no tools or tool calls (use chat, responses or messages)")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// poolingSource is the synthetic source of --endpoint embeddings, rerank
// or score: the flags it reads.
func poolingSource(src synthSource, ep string) synthSource {
	src.flags = slices.Concat(poolingFlags, rankingFlags)
	if ep == trace.EndpointEmbeddings {
		src.flags = slices.Concat(poolingFlags, embeddingsFlags)
	}
	src.build = buildPooling
	return src
}

// buildPooling reads the flags of --endpoint embeddings, rerank or score.
func buildPooling(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.PoolingOptions{Endpoint: f.endpoint, Count: synth.DefaultConversations, Seed: f.seed, MaxBytes: int64(f.maxBytes)}
	if f.conversations > 0 {
		o.Count = f.conversations
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	type distDst struct {
		flag distFlag
		dst  *synth.Dist
	}
	dists := []distDst{
		{distFlag{"documents", &f.documents, synth.Count}, &o.Documents},
		{distFlag{"query-tokens", &f.queryTokens, synth.Count}, &o.QueryTokens},
		{distFlag{"document-tokens", &f.documentTokens, synth.Count}, &o.DocumentTokens},
	}
	if f.endpoint == trace.EndpointEmbeddings {
		dists = []distDst{
			{distFlag{"batch-size", &f.batchSize, synth.Count}, &o.BatchSize},
			{distFlag{"input-tokens", &f.inputTokens, synth.Count}, &o.InputTokens},
		}
	}
	for _, d := range dists {
		v, err := d.flag.parse()
		if err != nil {
			return nil, err
		}
		*d.dst = v
		in.used[d.flag.name] = v.String()
	}
	var err error
	if o.Corpus, err = in.corpus(); err != nil {
		return nil, err
	}
	return synth.NewPooling(o)
}

// mediaFlags are the flags of media on user messages, which every
// generating source reads.
var mediaFlags = append([]string{"images", "image-size", "image-format", "audio-seconds", "videos", "video-size", "video-frames"},
	randomMMFlags...)

// randomMMFlags are vLLM random-mm's item flags, which synth takes under
// the same names (and --from-vllm passes on).
var randomMMFlags = []string{"random-mm-base-items-per-request", "random-mm-num-mm-items-range-ratio",
	"random-mm-limit-mm-per-prompt", "random-mm-bucket-config"}

// mediaOptions reads the media flags: nil when none asks for media. The
// shapes are checked here, before anything is generated, each error
// naming its flag.
func (o *synthOptions) mediaOptions() (*synth.MediaOptions, error) {
	f := o.flags
	mm := slices.ContainsFunc(randomMMFlags, f.Changed)
	if !f.Changed("images") && !f.Changed("videos") && !f.Changed("audio-seconds") && !mm {
		for _, n := range []string{"image-size", "image-format", "video-size", "video-frames"} {
			if f.Changed(n) {
				return nil, fmt.Errorf("--%s shapes media: give --images, --videos or --audio-seconds with it", n)
			}
		}
		return nil, nil
	}
	m := &synth.MediaOptions{ImageFormat: o.imageFormat, VideoFrames: o.videoFrames}
	if m.ImageFormat != "png" && m.ImageFormat != "jpeg" {
		return nil, fmt.Errorf("--image-format %q: want png or jpeg", m.ImageFormat)
	}
	var err error
	if m.ImageSizes, err = synth.ParseSizes(o.imageSize); err != nil {
		return nil, fmt.Errorf("--image-size: %w", err)
	}
	vs, err := synth.ParseSizes(o.videoSize)
	if err != nil || len(vs) != 1 {
		return nil, fmt.Errorf("--video-size %q: want one WIDTHxHEIGHT, e.g. 640x360", o.videoSize)
	}
	m.VideoSize = vs[0]
	for _, d := range []struct {
		flag distFlag
		dst  *synth.Dist
	}{
		{distFlag{"images", &o.images, synth.Count}, &m.Images},
		{distFlag{"videos", &o.videos, synth.Count}, &m.Videos},
		{distFlag{"audio-seconds", &o.audioSeconds, synth.Seconds}, &m.AudioSeconds},
	} {
		if f.Changed(d.flag.name) {
			if *d.dst, err = d.flag.parse(); err != nil {
				return nil, err
			}
		}
	}
	if mm {
		limits, err := synth.ParseMMLimits(o.mmLimit)
		if err != nil {
			return nil, err
		}
		buckets, err := synth.ParseMMBuckets(o.mmBucket)
		if err != nil {
			return nil, err
		}
		if m.RandomMM, err = synth.NewRandomMM(o.mmBase, o.mmRatio, limits, buckets); err != nil {
			return nil, err
		}
		for _, k := range m.Kinds() {
			if !trace.CarriesMedia(o.endpoint, k) {
				return nil, fmt.Errorf("--random-mm-bucket-config: --endpoint %s carries no %s", o.endpoint, k)
			}
		}
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}
