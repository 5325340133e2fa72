package capture_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/capture"
	"github.com/tracekit/tracekit/clock"
	"github.com/tracekit/tracekit/mock"
	"github.com/tracekit/tracekit/record"
	"github.com/tracekit/tracekit/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// BenchmarkProxyOverhead measures what the capture proxy adds, per event:
// the client stamps each event when its read returns and the proxy stamps
// the same event when its upstream read returned (one process, one clock),
// so client stamp - proxy stamp is the forwarding delay (write, flush,
// loopback, client read): an upper bound of what the proxy adds over direct
// access. The request path's share (client send to proxy send) is added for
// the first event (TTFT). Each round runs its streams concurrently,
// arriving over 200 ms, each of 32 events gap apart; the first round (which
// dials every connection) is warm-up. Mock, proxy and clients share this
// process: at high event rates on a small machine the figure includes CPU
// saturation, not only the proxy's path length. The goal (<= 200 us
// added TTFT and ITL p99) is stated at 1,000 streams.
func BenchmarkProxyOverhead(b *testing.B) {
	for _, c := range []struct {
		streams int
		gap     time.Duration
	}{{100, 10 * time.Millisecond}, {1000, 50 * time.Millisecond}} {
		b.Run(fmt.Sprintf("streams=%d", c.streams), func(b *testing.B) { proxyOverhead(b, c.streams, c.gap) })
	}
}

func proxyOverhead(b *testing.B, streams int, gap time.Duration) {
	cfg := mock.DefaultConfig()
	cfg.Latency.PrefillBase = mock.Duration(5 * time.Millisecond)
	cfg.Latency.PrefillPerToken = 0
	cfg.Latency.DecodeBase = mock.Duration(gap)
	cfg.Latency.DecodePerSeq = 0
	cfg.Latency.JitterCV = 0.3 // desynchronise the streams, as real ones are
	cfg.Latency.MaxNumSeqs = streams
	up := mock.StartT(b, cfg)
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: b.TempDir(), Tokenizer: tokenizer.Default(), Queue: 2 * streams}, "")
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}}
	type seen struct {
		sent   int64
		events []int64
	}
	var mu sync.Mutex
	byID := map[string]seen{}
	body := `{"model":"tracekit-mock","messages":[{"role":"user","content":"benchmark"}],"stream":true,"max_tokens":32,"ignore_eos":true}`
	round := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() {
				// Arrivals spread over 200 ms, as independent users' are.
				time.Sleep(time.Duration(i) * 200 * time.Millisecond / time.Duration(streams))
				id := fmt.Sprintf("b-%d-%d", round, i)
				req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("X-Request-Id", id)
				s := record.NewStream(nil)
				sent := clock.Mono()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				s.ReadBody(resp.Body, make([]byte, 8192), clock.Mono)
				var rec trace.Record
				s.Fill(&rec)
				mu.Lock()
				byID[id] = seen{sent, rec.EventNs}
				mu.Unlock()
			})
		}
		wg.Wait()
		round++
	}
	b.StopTimer()
	if err := ps.Close(); err != nil {
		b.Fatal(err)
	}
	var itl, ttft []int64
	for _, seg := range ps.Proxy().Segments() {
		recs, meta, err := trace.ReadRecords(seg.Recording)
		if err != nil {
			b.Fatal(err)
		}
		origin := meta.StartMonoNs
		for _, r := range recs {
			c, ok := byID[r.RequestID]
			if !ok || len(c.events) != len(r.EventNs) || len(c.events) == 0 {
				b.Fatalf("request %s: client saw %d events, proxy %d", r.RequestID, len(c.events), len(r.EventNs))
			}
			if strings.HasPrefix(r.RequestID, "b-0-") && round > 1 {
				continue // the first round dials every connection: warm-up
			}
			for i, t := range r.EventNs {
				d := c.events[i] - (t + origin)
				if i == 0 {
					ttft = append(ttft, d+(r.SentNs+origin-c.sent))
				} else {
					itl = append(itl, d)
				}
			}
		}
	}
	pct := func(v []int64, p float64) float64 {
		slices.Sort(v)
		return float64(v[int(p*float64(len(v)-1))]) / 1e3
	}
	b.ReportMetric(pct(itl, 0.5), "added-event-p50-us")
	b.ReportMetric(pct(itl, 0.99), "added-event-p99-us")
	b.ReportMetric(pct(ttft, 0.5), "added-ttft-p50-us")
	b.ReportMetric(pct(ttft, 0.99), "added-ttft-p99-us")
}
