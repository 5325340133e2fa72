package analyze

import (
	"bufio"
	"fmt"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// Media: what the requests with images, video or audio sent (the
// recording's media columns), how long their bodies took to write, the
// prompt tokens the server said their media took, and TTFT by how much
// media a request carried. Only what was recorded is shown: media tokens
// come from the server's usage split (vLLM's
// prompt_tokens_details.multimodal_tokens, OpenAI's audio_tokens); a run
// whose server did not split them says so instead of estimating them.

// mediaKinds are the kinds in the order of RequestMedia.Kinds.
var mediaKinds = [...]string{trace.MediaImage, trace.MediaVideo, trace.MediaAudio}

// RequestMedia is what one request sent of media; nil on a Request that
// sent none.
type RequestMedia struct {
	Items        int32
	Bytes        int64 // encoded bytes, before base64
	RequestBytes int64 // the whole body
	// SendNs is the body's send time (sent_ns - write_start_ns): the
	// start of the request's first write to the connection to the return
	// of its last; -1 when the write start was not recorded.
	SendNs int64
	// Kinds are the items, bytes and usage tokens by kind (mediaKinds);
	// KindsKnown is false when the recording does not tell the kinds (it
	// predates those columns).
	Kinds      [3]KindSent
	KindsKnown bool
}

// KindSent is a request's media of one kind; Tokens is 0 when the usage
// did not report them.
type KindSent struct {
	Items  int32
	Bytes  int64
	Tokens int32
}

// requestMedia reads a record's media columns; nil when it sent none.
func requestMedia(r *trace.Record) *RequestMedia {
	if r.MediaItems <= 0 {
		return nil
	}
	m := &RequestMedia{Items: r.MediaItems, Bytes: r.MediaBytes, RequestBytes: r.RequestBytes, SendNs: -1,
		Kinds: [3]KindSent{{r.ImageItems, r.ImageBytes, r.ImageTokens}, {r.VideoItems, r.VideoBytes, r.VideoTokens},
			{r.AudioItems, r.AudioBytes, r.AudioTokens}}}
	m.KindsKnown = r.ImageItems+r.VideoItems+r.AudioItems == r.MediaItems
	if r.WriteStartNs > 0 && r.SentNs >= r.WriteStartNs {
		m.SendNs = r.SentNs - r.WriteStartNs
	}
	return m
}

// MediaStats are the media figures of a run with media (Summary.Media).
// Per-request figures are over the analyzed requests that carried media;
// bytes are the items' encoded bytes (a data URI's base64 is a third
// more, counted in RequestBytes).
type MediaStats struct {
	Requests     int    `json:"requests"` // analyzed requests that carried media
	Items        int64  `json:"items"`
	Bytes        int64  `json:"bytes"`
	ItemsPer     Values `json:"items_per_request"`
	BytesPer     Values `json:"bytes_per_request"`
	RequestBytes Values `json:"request_bytes"` // the whole body
	// Send is the body's send time (sent_ns - write_start_ns): the client
	// handing the body to the kernel, from the start of its first write to
	// the return of its last, over the requests that recorded it.
	Send Stats `json:"send_time"`
	// KindsKnown is false when the recording does not tell the kinds
	// (Kinds is then empty).
	KindsKnown bool        `json:"kinds_known"`
	Kinds      []MediaKind `json:"kinds,omitempty"`
	// ByItems and ByBytes are TTFT of the completed streamed requests
	// bucketed by their media items and media bytes (requests without
	// media in the 0 bucket); empty buckets are left out.
	ByItems []MediaBucket `json:"ttft_by_items"`
	ByBytes []MediaBucket `json:"ttft_by_bytes"`
}

// MediaKind is one kind's figures, over the requests that carried it.
type MediaKind struct {
	Kind     string `json:"kind"`
	Requests int    `json:"requests"`
	Items    int64  `json:"items"`
	Bytes    int64  `json:"bytes"`
	ItemsPer Values `json:"items_per_request"`
	BytesPer Values `json:"bytes_per_request"`
	// TokensReported counts the completed requests whose usage gave this
	// kind's tokens; Tokens and TokensPer are theirs. 0: the server did
	// not report them, and they are unknown.
	TokensReported int    `json:"tokens_reported"`
	Tokens         int64  `json:"tokens"`
	TokensPer      Values `json:"tokens_per_request"`
}

// MediaBucket is TTFT over the requests whose media items (or bytes) lie
// in [Lo, Hi].
type MediaBucket struct {
	Label     string  `json:"label"`
	Lo        int64   `json:"lo"`
	Hi        int64   `json:"hi"`
	Requests  int     `json:"requests"`
	MeanX     float64 `json:"mean_x"` // the requests' mean items (or bytes): where a chart puts the bucket
	MeanTTFT  float64 `json:"mean_ttft_ms"`
	P50TTFT   float64 `json:"p50_ttft_ms"`
	P90TTFT   float64 `json:"p90_ttft_ms"`
	P99TTFT   float64 `json:"p99_ttft_ms"`
	ttfts, xs []float64
}

// countBucket places n items: 0, 1, 2, then powers of two (3-4, 5-8, ...).
func countBucket(n int64) (lo, hi int64, label string) {
	if n <= 2 {
		return n, n, fmt.Sprint(n)
	}
	hi = 4
	for hi < n {
		hi *= 2
	}
	return hi/2 + 1, hi, fmt.Sprintf("%d-%d", hi/2+1, hi)
}

// byteBucket places n bytes: 0, then powers of four from 1 KiB
// (up to 1 KiB, 1-4 KiB, 4-16 KiB, ...).
func byteBucket(n int64) (lo, hi int64, label string) {
	if n <= 0 {
		return 0, 0, "0"
	}
	if n <= 1<<10 {
		return 1, 1 << 10, "<= 1 KiB"
	}
	hi = 4 << 10
	for hi < n {
		hi *= 4
	}
	return hi/4 + 1, hi, sizeLabel(hi/4) + " - " + sizeLabel(hi)
}

// sizeLabel writes a power-of-two size in KiB, MiB or GiB.
func sizeLabel(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// media computes Summary.Media; it stays nil when no request sent media,
// so a text run's reports (and JSON keys) are as before.
func (s *Summary) media() {
	if !slices.ContainsFunc(s.Reqs, func(q Request) bool { return q.Media != nil }) {
		return
	}
	lim, ps := s.Options.MaxExactSamples, s.Options.Percentiles
	m := &MediaStats{KindsKnown: true}
	items, bytes, body, send := newDist(lim), newDist(lim), newDist(lim), newDist(lim)
	type kindDists struct{ items, bytes, tokens *Dist }
	var kd [len(mediaKinds)]kindDists
	var ks [len(mediaKinds)]MediaKind
	for k := range kd {
		kd[k] = kindDists{newDist(lim), newDist(lim), newDist(lim)}
		ks[k].Kind = mediaKinds[k]
	}
	byItems, byBytes := map[int64]*MediaBucket{}, map[int64]*MediaBucket{}
	bucket := func(in map[int64]*MediaBucket, x int64, place func(int64) (int64, int64, string), ttft float64) {
		lo, hi, label := place(x)
		b := in[lo]
		if b == nil {
			b = &MediaBucket{Label: label, Lo: lo, Hi: hi}
			in[lo] = b
		}
		b.ttfts, b.xs = append(b.ttfts, ttft), append(b.xs, float64(x))
	}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		var n, nb int64
		if md := q.Media; md != nil {
			n, nb = int64(md.Items), md.Bytes
			m.Requests++
			m.Items += n
			m.Bytes += nb
			addValue(items, float64(n))
			addValue(bytes, float64(nb))
			addValue(body, float64(md.RequestBytes))
			if md.SendNs >= 0 {
				send.Add(float64(md.SendNs))
			}
			m.KindsKnown = m.KindsKnown && md.KindsKnown
			for k, ki := range md.Kinds {
				if ki.Items <= 0 {
					continue
				}
				ks[k].Requests++
				ks[k].Items += int64(ki.Items)
				ks[k].Bytes += ki.Bytes
				addValue(kd[k].items, float64(ki.Items))
				addValue(kd[k].bytes, float64(ki.Bytes))
				if q.Success && ki.Tokens > 0 {
					ks[k].TokensReported++
					ks[k].Tokens += int64(ki.Tokens)
					addValue(kd[k].tokens, float64(ki.Tokens))
				}
			}
		}
		if q.Success && !q.NonStreaming && q.Events > 0 {
			ttft := float64(q.TTFTNs) / 1e6
			bucket(byItems, n, countBucket, ttft)
			bucket(byBytes, nb, byteBucket, ttft)
		}
	}
	m.ItemsPer, m.BytesPer, m.RequestBytes = valuesOf(items, ps), valuesOf(bytes, ps), valuesOf(body, ps)
	m.Send = send.Stats(ps)
	if m.KindsKnown {
		for k := range ks {
			if ks[k].Requests == 0 {
				continue
			}
			ks[k].ItemsPer, ks[k].BytesPer, ks[k].TokensPer = valuesOf(kd[k].items, ps), valuesOf(kd[k].bytes, ps), valuesOf(kd[k].tokens, ps)
			m.Kinds = append(m.Kinds, ks[k])
		}
	}
	m.ByItems, m.ByBytes = finishBuckets(byItems), finishBuckets(byBytes)
	s.Media = m
}

// finishBuckets computes each bucket's TTFT figures, in order of Lo.
func finishBuckets(in map[int64]*MediaBucket) []MediaBucket {
	out := make([]MediaBucket, 0, len(in))
	for _, b := range in {
		slices.Sort(b.ttfts)
		b.Requests = len(b.ttfts)
		b.MeanX = ratio(sum(b.xs), float64(len(b.xs)))
		b.MeanTTFT = ratio(sum(b.ttfts), float64(len(b.ttfts)))
		b.P50TTFT, b.P90TTFT, b.P99TTFT = Percentile(b.ttfts, 50), Percentile(b.ttfts, 90), Percentile(b.ttfts, 99)
		b.ttfts, b.xs = nil, nil
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b MediaBucket) int { return int(a.Lo - b.Lo) })
	return out
}

// writeMedia prints the media section of a run with media.
func (s *Summary) writeMedia(b *bufio.Writer) {
	m := s.Media
	if m == nil {
		return
	}
	fmt.Fprintln(b, center("Media", '-', 50))
	fmt.Fprintf(b, "%-40s %d of %d (%d items, %.2f MB encoded)\n", "Requests with media:", m.Requests, s.Requests, m.Items, float64(m.Bytes)/1e6)
	s.statsHeader(b, "per request with media")
	valuesRow(b, "media items", m.ItemsPer)
	valuesRow(b, "media bytes (encoded)", m.BytesPer)
	valuesRow(b, "request body bytes", m.RequestBytes)
	if m.Send.Count > 0 {
		statsRow(b, "body send time (ms)", m.Send)
		fmt.Fprintln(b, "(body send time: sent_ns - write_start_ns, the start of the request's first write to the connection to the return of its last)")
	} else {
		fmt.Fprintln(b, "body send time: not recorded (the recording has no write_start_ns)")
	}
	if !m.KindsKnown {
		fmt.Fprintln(b, "media by kind: not recorded (the recording has no columns by kind)")
	} else {
		fmt.Fprintf(b, "%-6s %9s %9s %12s %10s %12s  %s\n", "kind", "requests", "items", "MB", "items/req", "KB/req", "media tokens/req (server's usage)")
		for _, k := range m.Kinds {
			tok := "unknown: not reported by the server"
			if k.TokensReported > 0 {
				tok = fmt.Sprintf("mean %.1f, min %.0f, max %.0f (%d requests reporting, %d tokens)", k.TokensPer.Mean, k.TokensPer.Min, k.TokensPer.Max, k.TokensReported, k.Tokens)
			}
			fmt.Fprintf(b, "%-6s %9d %9d %12.3f %10.2f %12.1f  %s\n", k.Kind, k.Requests, k.Items, float64(k.Bytes)/1e6, k.ItemsPer.Mean, k.BytesPer.Mean/1e3, tok)
		}
	}
	for _, t := range []struct {
		title, col string
		bs         []MediaBucket
	}{{"TTFT by media items (ms)", "items", m.ByItems}, {"TTFT by media bytes (ms)", "bytes", m.ByBytes}} {
		fmt.Fprintln(b, t.title+":")
		fmt.Fprintf(b, "%-20s %9s %10s %10s %10s %10s\n", t.col, "requests", "mean", "P50", "P90", "P99")
		for _, x := range t.bs {
			fmt.Fprintf(b, "%-20s %9d %10.2f %10.2f %10.2f %10.2f\n", x.Label, x.Requests, x.MeanTTFT, x.P50TTFT, x.P90TTFT, x.P99TTFT)
		}
	}
}

// mediaCharts are the HTML charts of TTFT by media items and bytes; none
// without media.
func (s *Summary) mediaCharts() []chart {
	m := s.Media
	if m == nil {
		return nil
	}
	series := func(bs []MediaBucket, scale float64) []chartSeries {
		mean, p90 := chartSeries{name: "TTFT mean", color: colorA}, chartSeries{name: "TTFT p90", color: colorB}
		for _, x := range bs {
			mean.pts = append(mean.pts, [2]float64{x.MeanX / scale, x.MeanTTFT})
			p90.pts = append(p90.pts, [2]float64{x.MeanX / scale, x.P90TTFT})
		}
		return []chartSeries{mean, p90}
	}
	return []chart{
		{id: "ttft-media-items", title: "TTFT by media items per request (buckets)", xlabel: "media items (bucket mean)", ylabel: "TTFT (ms)", series: series(m.ByItems, 1)},
		{id: "ttft-media-bytes", title: "TTFT by media bytes per request (buckets)", xlabel: "media MB (bucket mean)", ylabel: "TTFT (ms)", series: series(m.ByBytes, 1e6)},
	}
}
