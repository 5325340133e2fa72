package record

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// benchStream builds a vLLM-like chat stream of n token events.
func benchStream(n int, continuous bool) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	for i := range n {
		usage := "null"
		if continuous {
			usage = fmt.Sprintf(`{"prompt_tokens":812,"total_tokens":%d,"completion_tokens":%d}`, 812+i+1, i+1)
		}
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" tok%d"},"logprobs":null,"finish_reason":null}],"usage":%s}`+"\n\n", i, usage)
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":812,"total_tokens":%d,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n", 812+n, n)
	return b.Bytes()
}

type oneCounter struct{}

func (oneCounter) Count(string) int { return 1 }

// BenchmarkFeed measures the parser alone, fed in 1.5 KB reads (a typical
// TCP read of a busy stream). Reports events/s; allocs/op must be 0.
func BenchmarkFeed(b *testing.B) {
	for _, cont := range []bool{false, true} {
		b.Run(fmt.Sprintf("continuous_usage=%v", cont), func(b *testing.B) {
			const events = 256
			data := benchStream(events, cont)
			s := NewStream(oneCounter{})
			var rec trace.Record
			run := func() {
				s.Reset()
				for p := data; len(p) > 0; {
					n := min(1500, len(p))
					s.Feed(p[:n], 1)
					p = p[n:]
				}
				s.Fill(&rec)
			}
			run() // grow the buffers
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(events+1)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// chunkedReader returns one event per Read, as a stream read at the pace
// of the server does.
type chunkedReader struct {
	data []byte
	at   int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.at >= len(c.data) {
		return 0, io.EOF
	}
	end := bytes.Index(c.data[c.at:], []byte("\n\n"))
	if end < 0 {
		end = len(c.data) - c.at
	} else {
		end += 2
	}
	n := copy(p, c.data[c.at:c.at+end])
	c.at += n
	return n, nil
}

// BenchmarkStampOverhead measures what stamping costs per read: ReadBody
// with clock.Mono against ReadBody with a constant clock, one event per
// read. The ns/read metric of the stamp run minus that of the const run is
// the stamping overhead. It also reports the delay between the stamp and
// the end of that event's parse (stamp-to-parsed p50/p99), i.e. how stale
// an event's stamp never is: the stamp is taken before parsing.
func BenchmarkStampOverhead(b *testing.B) {
	data := benchStream(256, false)
	buf := make([]byte, 4096)
	for _, mode := range []string{"const", "mono"} {
		b.Run(mode, func(b *testing.B) {
			now := func() int64 { return 1 }
			if mode == "mono" {
				now = clock.Mono
			}
			s := NewStream(oneCounter{})
			r := &chunkedReader{data: data}
			b.ReportAllocs()
			reads := 0
			for b.Loop() {
				s.Reset()
				r.at = 0
				s.ReadBody(r, buf, now)
				reads += 258
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reads), "ns/read")
		})
	}
	// Time from the stamp to the end of that read's parse, per event.
	b.Run("parse-after-stamp", func(b *testing.B) {
		s := NewStream(oneCounter{})
		lat := make([]int64, 0, 1<<16)
		r := &chunkedReader{data: data}
		for b.Loop() {
			s.Reset()
			r.at = 0
			for {
				n, err := r.Read(buf)
				t := clock.Mono()
				s.Feed(buf[:n], t)
				if len(lat) < cap(lat) {
					lat = append(lat, clock.Mono()-t)
				}
				if err != nil {
					break
				}
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	})
}

// BenchmarkRecorderSubmit measures the writer's sustained rate: records of
// 64 events each through the journal and the Parquet file, Close included.
func BenchmarkRecorderSubmit(b *testing.B) {
	path := b.TempDir() + "/bench.parquet"
	r, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{Queue: 1024})
	if err != nil {
		b.Fatal(err)
	}
	rec := trace.Record{RequestID: "req", ConversationID: "conv", Target: "http://127.0.0.1:8000", Status: 200, PromptTokens: -1, CompletionTokens: 64, CachedTokens: -1}
	for i := range 64 {
		rec.EventNs = append(rec.EventNs, int64(i)*15_000_000)
		rec.EventTokens = append(rec.EventTokens, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Submit(&rec)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(r.Stats().Stalls), "stalls")
}
