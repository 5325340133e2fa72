package replay

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// Stamp modes (Config.StampMode): how an event's arrival is stamped.
//
//   - StampGoroutine: clock.Mono when the read returned to the request
//     goroutine: the arrival plus the time the goroutine waited to run.
//   - StampKernel: the kernel's software receive stamp of the last TCP
//     segment the read returned (SO_TIMESTAMPING, read with recvmsg),
//     converted to the run's clock: the scheduling wait is gone, but
//     several events that queued up before a late read share its stamp.
//   - StampKernelOffset: as StampKernel, and a read that brings more than
//     one event is handed out one event at a time (the rest kept for the
//     next Reads, which need no syscall), so that every Read ends at an
//     event's byte offset on the connection; an observer process
//     (stamp_observe_linux.go) records when each byte offset arrived, with
//     the kernel's own receive stamp, and the event gets the earlier of the
//     two times, late reader or not. The kernel alone cannot tell: TCP
//     merges queued segments and keeps the newest stamp. It costs the
//     observer's wake and one peek per arrival, in its own process.
//
// The default is StampKernelOffset: it is never later than StampKernel
// and the reader's own cost is the same (one recvmsg per read).
//
// Where a mode does not apply the run falls back and says so in
// trace.RunStamps.Note: no SO_TIMESTAMPING (not Linux) means goroutine
// stamps; a TLS connection gets kernel stamps of the TCP reads under TLS
// (the bytes are encrypted, so no event ends can be found in them); no
// observer process (this executable cannot be started again, or it died)
// means kernel stamps, for the run or for the connections opened after; a
// read that carries no kernel stamp is stamped by the clock and counted.
const (
	StampGoroutine    = trace.StampGoroutine
	StampKernel       = trace.StampKernel
	StampKernelOffset = trace.StampKernelOffset
)

// DefaultStampMode is the mode of an empty Config.StampMode where the
// kernel supports it.
const DefaultStampMode = StampKernelOffset

// stampRemeasure is how often the kernel stamps' REALTIME-to-monotonic
// offset is measured again.
const stampRemeasure = time.Second

// ParseStampMode checks a stamp mode; "" is the default.
func ParseStampMode(s string) (string, error) {
	switch s {
	case "", StampGoroutine, StampKernel, StampKernelOffset:
		return s, nil
	}
	return parseEnum("StampMode", s, StampGoroutine, StampKernel, StampKernelOffset)
}

// stamper is a run's stamp mode and its counters, shared by its
// connections (touched per read only through atomics).
type stamper struct {
	requested string
	mode      string // the mode connections are opened in
	note      string
	conv      *clock.RealToMono // kernel modes
	start     atomic.Int64      // the run's start (Mono): stamps are run-relative

	obs *observer // kernel-offset: the arrival observer (stamp_observe_linux.go)

	kernelReads, fallbackReads, splitReads, observedReads, observeErrs atomic.Int64
	tlsConns, plainFallback                                            atomic.Int64
	enableErr                                                          atomic.Pointer[string]
}

// newStamper settles the mode of a run of cfg: the requested (or
// default) mode where this system supports it, else the next best.
func newStamper(cfg *Config) *stamper {
	s := &stamper{requested: cfg.StampMode, mode: cfg.StampMode}
	if s.mode == "" {
		s.mode = DefaultStampMode
	}
	if s.mode != StampGoroutine {
		if why := kernelStampsUnsupported(); why != "" {
			s.note = why + ": goroutine stamps"
			s.mode = StampGoroutine
		}
	}
	if s.mode == StampKernelOffset {
		tls := 0
		for _, t := range cfg.Targets {
			if strings.HasPrefix(t, "https://") {
				tls++
			}
		}
		switch {
		case tls == len(cfg.Targets) && tls > 0:
			s.mode, s.note = StampKernel, "https targets: kernel stamps of the TCP reads under TLS (event ends cannot be found in encrypted bytes)"
		case tls > 0:
			s.note = "https targets get kernel stamps of the TCP reads under TLS, without event offsets"
		}
	}
	if s.mode != StampGoroutine {
		s.conv = clock.NewRealToMono(stampRemeasure)
	}
	if s.mode == StampKernelOffset {
		o, err := startObserver()
		if err != nil {
			s.mode, s.note = StampKernel, fmt.Sprintf("no arrival observer (%v): kernel stamps", err)
		}
		s.obs = o
	}
	return s
}

// close stops the arrival observer, if any.
func (s *stamper) close() {
	if s.obs != nil {
		s.obs.stop()
		s.obs = nil
	}
}

// observerCPU is the arrival observer's CPU time so far in ns, 0 without
// one.
func (s *stamper) observerCPU() int64 {
	if s.obs == nil {
		return 0
	}
	return s.obs.cpuNs()
}

// kernel reports whether connections read with kernel stamps.
func (s *stamper) kernel() bool { return s.mode != StampGoroutine }

// toMono converts a kernel stamp (CLOCK_REALTIME ns) to Mono.
func (s *stamper) toMono(realNs int64) int64 { return s.conv.Mono(realNs) }

// meta is the run's trace.RunStamps so far.
func (s *stamper) meta() *trace.RunStamps {
	m := &trace.RunStamps{Requested: s.requested, Mode: s.mode, Note: s.note,
		KernelReads: s.kernelReads.Load(), FallbackReads: s.fallbackReads.Load(), SplitReads: s.splitReads.Load(),
		ObservedReads: s.observedReads.Load()}
	if s.obs != nil {
		m.ObserverPriority = s.obs.priority
	}
	if n := s.observeErrs.Load(); n > 0 {
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + fmt.Sprintf("%d connections could not join the arrival observer: kernel stamps", n)
	}
	if e := s.enableErr.Load(); e != nil {
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + fmt.Sprintf("%d connections could not enable SO_TIMESTAMPING (%s) and used goroutine stamps", s.plainFallback.Load(), *e)
	}
	if s.conv != nil {
		m.RealMinusMonoNs, m.OffsetWidthNs = s.conv.Offset()
		m.RemeasureNs, m.Remeasures, m.OffsetDriftNs = int64(s.conv.Every()), s.conv.Remeasures(), s.conv.Drift()
	}
	return m
}

// bodyClock is the clock a response body read on c is stamped with: the
// run's clock in goroutine mode (or for a conn that is not ours), else the
// conn's last kernel receive stamp, run-relative.
func (r *runState) bodyClock(c *conn) func() int64 {
	if c == nil || c.rx == nil {
		return r.now
	}
	r.conns.stamp.start.Store(r.start)
	return c.stampFn
}

// headerStamp is the response headers' arrival on c: the last kernel
// receive stamp (the read that completed the headers) in kernel modes,
// so that the events, stamped likewise, never precede it; else now, the
// run clock when the headers were parsed.
func (r *runState) headerStamp(c *conn, now int64) int64 {
	if c == nil || c.rx == nil {
		return now
	}
	return r.bodyClock(c)()
}

// eventEnd returns the length of the prefix of p that ends with its first
// SSE event (a blank line: "\n\n" or "\r\n\r\n") and the "\r\n" that
// closes its HTTP chunk when it follows, or len(p) when p holds none. The
// chunk's end belongs with the event: the HTTP client reads it before it
// hands the chunk's data on, and a read that waited for it would carry the
// stamp of whatever came after. A cut that is not an event's end (the
// response header's blank line) only costs a read.
func eventEnd(p []byte) int {
	for i := 1; i < len(p); i++ {
		if p[i] != '\n' {
			continue
		}
		if p[i-1] == '\n' || (i >= 3 && p[i-1] == '\r' && p[i-2] == '\n' && p[i-3] == '\r') {
			if i+2 < len(p) && p[i+1] == '\r' && p[i+2] == '\n' {
				return i + 3
			}
			return i + 1
		}
	}
	return len(p)
}
