package media

import (
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// BenchmarkMake is the materialization rate of virtual media: what replay's
// look-ahead pays per item before a request is due. One item per
// iteration, a new seed each (the pixels differ, as a trace's items do);
// items/s and MB/s of encoded output are reported.
func BenchmarkMake(b *testing.B) {
	for _, c := range []struct {
		name string
		m    trace.Media
	}{
		{"png-1024x1024", trace.Media{Kind: trace.MediaImage, Format: "png", Width: 1024, Height: 1024}},
		{"jpeg-1024x1024", trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 1024, Height: 1024}},
		{"wav-10s", trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 10000}},
		{"mp4-512x512x16", trace.Media{Kind: trace.MediaVideo, Format: "mp4", Width: 512, Height: 512, Frames: 16}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			var total int64
			m := c.m
			for i := 0; b.Loop(); i++ {
				m.Seed = int64(i)
				var err error
				if buf, err = Make(buf[:0], &m); err != nil {
					b.Fatal(err)
				}
				total += int64(len(buf))
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/s, "items/s")
			b.ReportMetric(float64(total)/1e6/s, "MB/s")
			b.ReportMetric(float64(total)/float64(b.N), "bytes/item")
		})
	}
}
