package live

import (
	"sync/atomic"

	"github.com/tracekit/tracekit/trace"
)

// Sample is what one finished request tells the live view.
type Sample struct {
	DoneNs       int64  // run clock, ns
	ErrorKind    string // "" when it succeeded
	TTFTNs       int64  // 0: none (failed before a token, non-streaming)
	E2ELNs       int64  // sent to done
	ITLNs        []int64
	OutputTokens int64
}

// SampleOf summarizes rec; it keeps nothing of rec's slices.
func SampleOf(rec *trace.Record) Sample {
	s := Sample{DoneNs: rec.DoneNs, ErrorKind: string(rec.ErrorKind)}
	if rec.SentNs > 0 && rec.DoneNs >= rec.SentNs {
		s.E2ELNs = rec.DoneNs - rec.SentNs
	}
	if !rec.NonStreaming && len(rec.EventNs) > 0 && rec.EventNs[0] >= rec.SentNs {
		s.TTFTNs = rec.EventNs[0] - rec.SentNs
		if len(rec.EventNs) > 1 {
			s.ITLNs = make([]int64, 0, len(rec.EventNs)-1)
			for i := 1; i < len(rec.EventNs); i++ {
				s.ITLNs = append(s.ITLNs, rec.EventNs[i]-rec.EventNs[i-1])
			}
		}
	}
	if rec.CompletionTokens >= 0 {
		s.OutputTokens = int64(rec.CompletionTokens)
	} else {
		for _, t := range rec.EventTokens {
			s.OutputTokens += int64(t)
		}
	}
	return s
}

// Feed is the bounded hand-off from the recorder to the view. Offer never
// waits: a full feed drops the sample and counts it.
type Feed struct {
	ch      chan Sample
	dropped atomic.Int64
}

// DefaultFeedCapacity is the feed's room when NewFeed is given 0: a
// second of samples at 4,000 requests/s.
const DefaultFeedCapacity = 4096

// NewFeed makes a feed with room for capacity samples (0: the default).
func NewFeed(capacity int) *Feed {
	if capacity <= 0 {
		capacity = DefaultFeedCapacity
	}
	return &Feed{ch: make(chan Sample, capacity)}
}

// Offer summarizes rec and hands it on without waiting; it is the
// recorder's Tap and keeps nothing of rec. A nil Feed ignores it.
func (f *Feed) Offer(rec *trace.Record) {
	if f == nil {
		return
	}
	select {
	case f.ch <- SampleOf(rec):
	default:
		f.dropped.Add(1)
	}
}

// OfferAt is Offer for a record whose times count from shiftNs on the
// view's clock (a capture segment that started shiftNs into the run).
func (f *Feed) OfferAt(rec *trace.Record, shiftNs int64) {
	if f == nil {
		return
	}
	s := SampleOf(rec)
	s.DoneNs += shiftNs
	select {
	case f.ch <- s:
	default:
		f.dropped.Add(1)
	}
}

// Dropped counts the samples Offer could not hand on.
func (f *Feed) Dropped() int64 { return f.dropped.Load() }
