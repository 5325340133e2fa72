package capture

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// segmentFor returns the current segment (opening or rotating as needed)
// and counts the request in flight in it.
func (p *Proxy) segmentFor(now int64) (*segment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("proxy closed")
	}
	if p.seg != nil && p.seg.due(now) {
		p.rotateLocked()
	}
	if p.seg == nil {
		p.nseg++
		s := &segment{
			n: p.nseg, origin: now, logf: p.cfg.Logf,
			base:     filepath.Join(p.cfg.OutDir, fmt.Sprintf("capture-%s-%04d", p.stamp, p.nseg)),
			rotateAt: now + int64(p.cfg.RotateEvery), rotateBytes: p.cfg.RotateBytes,
		}
		meta := trace.RunMeta{
			TracekitVersion: trace.Version,
			StartWallNs:     p.wallStart + (now - p.runStart),
			StartMonoNs:     now,
			Targets:         []string{p.target},
			Host:            p.host,
			Command:         p.cfg.Command,
			Config: map[string]any{
				"mode": "capture", "upstream": p.target, "segment": s.n,
				"session_header": p.cfg.SessionHeader, "redact_content": p.cfg.RedactContent,
			},
			Trace: p.traceMeta(),
		}
		meta.Metrics = p.cfg.Metrics
		s.meta, s.recOpts = meta, record.RecorderOptions{Queue: p.cfg.Queue, SyncEvery: p.cfg.SyncEvery, Scrub: p.cfg.Scrub}
		if tap := p.cfg.Tap; tap != nil {
			shift := now - p.runStart
			s.recOpts.Tap = func(rec *trace.Record) { tap(rec, shift) }
		}
		s.syncFile = p.cfg.syncFile
		s.traceMeta = *meta.Trace
		p.seg = s
	}
	p.seg.inflight.Add(1)
	return p.seg, nil
}

func (p *Proxy) traceMeta() *trace.TraceMeta {
	opts := map[string]string{"upstream": p.target}
	if p.cfg.RedactContent {
		opts["redacted"] = "true"
		opts["block_size"] = strconv.Itoa(RedactBlockSize)
	}
	return &trace.TraceMeta{
		TracekitVersion: trace.Version,
		Command:         p.cfg.Command,
		Tokenizer:       p.tok.Name(),
		Source:          "capture",
		CreatedAt:       clockWallRFC3339(p.wallStart),
		Options:         opts,
	}
}

// rotateLocked retires the current segment: a goroutine owned by
// p.closers waits for its requests and writes its files.
func (p *Proxy) rotateLocked() {
	s := p.seg
	if s == nil {
		return
	}
	p.seg = nil
	p.closers.Add(1)
	go func() {
		defer p.closers.Done()
		s.inflight.Wait()
		err := s.close()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.errs = append(p.errs, err)
			p.cfg.Logf("capture: %v", err)
			return
		}
		// Closers finish in any order (a larger segment takes longer to
		// write): the list stays in segment order.
		seg := Segment{Trace: s.tracePath, Recording: s.recPath, Requests: s.requests, n: s.n}
		if s.media != nil && s.media.Bytes() > 0 {
			seg.Media = trace.MediaPath(s.tracePath)
		}
		p.files = append(p.files, seg)
		slices.SortFunc(p.files, func(a, b Segment) int { return a.n - b.n })
	}()
}

// rotateIdle closes a segment whose time is up even when no request comes,
// and makes the current segment's trace journal durable every SyncEvery.
func (p *Proxy) rotateIdle() {
	defer p.ticker.Done()
	t := time.NewTicker(min(p.cfg.RotateEvery/4+time.Millisecond, p.cfg.SyncEvery))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.seg != nil && p.seg.due(clock.Mono()) {
				p.rotateLocked()
			}
			seg := p.seg
			p.mu.Unlock()
			if seg != nil { // fsync outside p.mu: arrivals never wait on disk
				if err := seg.syncTrace(); err != nil {
					p.cfg.Logf("capture: trace journal of segment %d: %v (the trace is still written at rotation)", seg.n, err)
				}
			}
		}
	}
}

// clockWallRFC3339 formats a unix-ns wall time.
func clockWallRFC3339(ns int64) string {
	return timeFromUnixNano(ns).UTC().Format("2006-01-02T15:04:05Z07:00")
}

func timeFromUnixNano(ns int64) time.Time { return time.Unix(0, ns) }
