package analyze

// Series are 1 s bins from the run start (bin i covers [i s, (i+1) s)).
type Series struct {
	OutputTokens []float64 `json:"output_tokens_per_s"` // tokens of events in the bin
	Messages     []float64 `json:"messages_per_s"`      // events in the bin (vLLM's peak counts these)
	Completed    []float64 `json:"completed_per_s"`     // successful requests ending in the bin
	Errors       []float64 `json:"errors_per_s"`        // failed requests ending in the bin
	Concurrency  []float64 `json:"concurrency"`         // time-averaged requests in flight
	TTFTMeanMs   []float64 `json:"ttft_mean_ms"`        // of successful requests sent in the bin, NaN-free (0 when none: see the counts)
	E2ELMeanMs   []float64 `json:"e2el_mean_ms"`
	E2ELMaxMs    []float64 `json:"e2el_max_ms"`
	// SentOK and SentTTFT count the successful requests sent in the bin
	// behind the E2EL and TTFT means (the streaming ones for TTFT): a bin
	// where they are 0 has no latency, not a latency of 0.
	SentOK   []float64 `json:"sent_ok_per_s"`
	SentTTFT []float64 `json:"sent_ttft_per_s"`
}

// series fills the 1 s time series.
func (s *Summary) series(tok, msg []float64) {
	n := len(tok)
	for i := range s.Reqs {
		n = max(n, int(min(s.Reqs[i].endNs()/nsPerSec, maxSeriesBins-1))+1)
	}
	se := &s.Series
	se.OutputTokens = append(tok, make([]float64, n-len(tok))...)
	se.Messages = append(msg, make([]float64, n-len(msg))...)
	se.Completed, se.Errors, se.Concurrency = make([]float64, n), make([]float64, n), make([]float64, n)
	se.TTFTMeanMs, se.E2ELMeanMs, se.E2ELMaxMs = make([]float64, n), make([]float64, n), make([]float64, n)
	sent, sentTTFT := make([]float64, n), make([]float64, n)
	bin := func(t int64) int { return int(min(max(t/nsPerSec, 0), int64(n-1))) }
	for i := range s.Reqs {
		q := &s.Reqs[i]
		end := q.endNs()
		// Time-weighted concurrency: add the overlap of [StartNs, end) with each bin.
		for b := bin(q.StartNs); b <= bin(end) && end > q.StartNs; b++ {
			lo, hi := max(q.StartNs, int64(b)*nsPerSec), min(end, int64(b+1)*nsPerSec)
			if hi > lo {
				se.Concurrency[b] += float64(hi-lo) / 1e9
			}
		}
		if !q.Success {
			se.Errors[bin(end)]++
			continue
		}
		se.Completed[bin(end)]++
		b := bin(q.StartNs)
		sent[b]++
		if !q.NonStreaming {
			sentTTFT[b]++
			se.TTFTMeanMs[b] += float64(q.TTFTNs) / 1e6
		}
		e := float64(q.E2ELNs) / 1e6
		se.E2ELMeanMs[b] += e
		se.E2ELMaxMs[b] = max(se.E2ELMaxMs[b], e)
	}
	for b := range sent {
		se.TTFTMeanMs[b] = ratio(se.TTFTMeanMs[b], sentTTFT[b])
		se.E2ELMeanMs[b] = ratio(se.E2ELMeanMs[b], sent[b])
	}
	se.SentOK, se.SentTTFT = sent, sentTTFT
}
