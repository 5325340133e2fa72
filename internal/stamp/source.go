package stamp

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// DefaultMode is the mode of an empty requested mode where the kernel
// supports it: kernel-offset is never later than kernel and the reader's
// own cost is the same (one recvmsg per read).
const DefaultMode = trace.StampKernelOffset

// remeasure is how often the kernel stamps' REALTIME-to-monotonic offset
// is measured again.
const remeasure = time.Second

// Source is a run's stamp mode and its counters, shared by its
// connections (touched per read only through atomics).
type Source struct {
	requested string
	mode      string // the mode connections are opened in
	note      string
	conv      *clock.RealToMono // kernel modes

	tap *tap      // kernel-offset: the packet tap (tap_linux.go), else
	obs *observer // the arrival observer process (observer_linux.go)
	// obsMu guards obs against Close while ObserverCPU reads it (a
	// sampler may read during and after the run); obsEndCPU is the
	// observer's CPU in this run when Close released it, obsBaseCPU its
	// CPU when this run took it over (an observer may serve several runs
	// in turn: pool_linux.go).
	obsMu      sync.Mutex
	obsEndCPU  int64
	obsBaseCPU int64
	// observer is trace.ObserverTap or trace.ObserverProcess, "" none;
	// tapBase is the tap's drop count when this run took it, tapDrops
	// this run's drops when Close released it.
	observer    string
	obsPriority string
	tapBase     int64
	tapDrops    int64
	// watchStop ends the observer's watch (watch.go); offNs is when the
	// watch switched the observer off (clock.Mono), 0 while it runs.
	watchStop chan struct{}
	watchDone chan struct{}
	offNs     atomic.Int64
	offWhy    atomic.Pointer[string]
	startNs   int64

	kernelReads, fallbackReads, splitReads, observedReads, ringReads, observeErrs, tapMisses, plainFallback atomic.Int64
	enableErr                                                                                               atomic.Pointer[string]
}

// New settles the mode of a run that asked for requested (one of
// trace.StampGoroutine, trace.StampKernel, trace.StampKernelOffset; ""
// is DefaultMode) and reads from targets servers, tlsTargets of them
// under TLS: the requested mode where this system supports it, else the
// next best, with the reason in Meta's note. In kernel-offset mode it
// starts the arrival observer; Close stops it.
func New(requested string, targets, tlsTargets int) *Source {
	s := &Source{requested: requested, mode: requested}
	if s.mode == "" {
		s.mode = DefaultMode
	}
	if s.mode != trace.StampGoroutine {
		if why := kernelStampsUnsupported(); why != "" {
			s.note = why + ": goroutine stamps"
			s.mode = trace.StampGoroutine
		}
	}
	if s.mode == trace.StampKernelOffset {
		switch {
		case tlsTargets == targets && tlsTargets > 0:
			s.mode, s.note = trace.StampKernel, "https targets: kernel stamps of the TCP reads under TLS (event ends cannot be found in encrypted bytes)"
		case tlsTargets > 0:
			s.note = "https targets get kernel stamps of the TCP reads under TLS, without event offsets"
		}
	}
	if s.mode != trace.StampGoroutine {
		s.conv = clock.NewRealToMono(remeasure)
	}
	if s.mode == trace.StampKernelOffset {
		t, terr := acquireTap()
		if terr == nil {
			// Every segment keeps its own stamp in the tap's ring: no
			// process, no CPU of its own, nothing to fall behind.
			s.tap, s.tapBase, s.observer = t, t.dropped(), trace.ObserverTap
			return s
		}
		if n := clientCPUs(); n == 1 {
			// The observer would run on the reader's own CPU, and at its
			// priority it takes that CPU first: when the client is busy the
			// reads fall behind and the stamps with them.
			s.mode, s.note = trace.StampKernel, "the client may run on one CPU only: no arrival observer (it would take the reader's CPU), kernel stamps"
			return s
		}
		o, err := acquireObserver()
		if err != nil {
			s.mode, s.note = trace.StampKernel, fmt.Sprintf("no arrival observer (packet tap: %v; process: %v): kernel stamps", terr, err)
		}
		s.obs = o
		if o != nil {
			s.observer, s.obsPriority = trace.ObserverProcess, o.priority
			s.obsBaseCPU = o.cpuNs()
			s.startWatch()
		}
	}
	return s
}

// Mode is the mode connections are read in.
func (s *Source) Mode() string { return s.mode }

// HeldPs is how many Ps the mode's goroutines hold while they wait: one
// in the kernel modes, whose poller blocks in epoll_wait on its P so that
// it reads the moment bytes come (poll_linux.go); none with goroutine
// stamps. A run that has other goroutines holding Ps adds as many to the
// process (internal/procs).
func (s *Source) HeldPs() int {
	if s.mode == trace.StampGoroutine {
		return 0
	}
	return 1
}

// Wrap returns nc read with kernel receive stamps, or nil in goroutine
// mode or when the socket refuses them (then nc is read as it is, and
// Meta's note counts it). encrypted says TLS will run above it: its
// reads are not cut at event ends.
func (s *Source) Wrap(nc net.Conn, encrypted bool) *Conn {
	if s.mode == trace.StampGoroutine {
		return nil
	}
	c, err := newConn(nc, s.mode == trace.StampKernelOffset && !encrypted, s)
	if err != nil {
		msg := err.Error()
		s.enableErr.CompareAndSwap(nil, &msg)
		s.plainFallback.Add(1)
		return nil
	}
	return c
}

// Close ends the run's use of the arrival observer, if any: it lingers a
// moment for the next run of this process, then stops (pool_linux.go).
// Connections still open keep reading, with kernel stamps once it stopped.
func (s *Source) Close() {
	s.stopWatch()
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	if s.tap != nil {
		s.tapDrops = s.tap.dropped() - s.tapBase
		releaseTap(s.tap)
		s.tap = nil
	}
	if s.obs != nil {
		s.obsEndCPU = s.obs.cpuNs() - s.obsBaseCPU
		releaseObserver(s.obs)
		s.obs = nil
	}
}

// ObserverCPU is the arrival observer's CPU time in this run so far in ns, 0 without
// one: a process of the client's own, whose CPU the client's is not
// complete without. After Close it stays at the observer's last figure.
// Safe to call at any time.
func (s *Source) ObserverCPU() int64 {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	if s.obs == nil {
		return s.obsEndCPU
	}
	return s.obs.cpuNs() - s.obsBaseCPU
}

// toMono converts a kernel stamp (CLOCK_REALTIME ns) to Mono.
func (s *Source) toMono(realNs int64) int64 { return s.conv.Mono(realNs) }

// Meta is the run's trace.RunStamps so far.
func (s *Source) Meta() *trace.RunStamps {
	m := &trace.RunStamps{Requested: s.requested, Mode: s.mode, Note: s.note,
		KernelReads: s.kernelReads.Load(), FallbackReads: s.fallbackReads.Load(), SplitReads: s.splitReads.Load(),
		ObservedReads: s.observedReads.Load(), RingReads: s.ringReads.Load()}
	m.Observer, m.ObserverPriority = s.observer, s.obsPriority
	s.obsMu.Lock()
	m.TapDrops = s.tapDrops
	if s.tap != nil {
		m.TapDrops = s.tap.dropped() - s.tapBase
	}
	s.obsMu.Unlock()
	if m.TapDrops > 0 {
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + fmt.Sprintf("the packet tap's ring was full and dropped %d segments: their bytes got kernel stamps", m.TapDrops)
	}
	if off := s.offNs.Load(); off != 0 {
		m.ObserverOffNs = off - s.startNs
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + fmt.Sprintf("the arrival observer was switched off %.1f s into the run (%s): kernel stamps after it",
			float64(m.ObserverOffNs)/1e9, *s.offWhy.Load())
	}
	if n := s.tapMisses.Load(); n > 0 {
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + fmt.Sprintf("the packet tap saw no SYN-ACK from the address dialed for %d connections (a full ring, or an address translated on this host): kernel stamps", n)
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

// eventEnd returns the length of the prefix of p that ends with its first
// SSE event (a blank line: "\n\n" or "\r\n\r\n") and the "\r\n" that
// closes its HTTP chunk when it follows, or len(p) when p holds none. The
// chunk's end belongs with the event: the HTTP client reads it before it
// hands the chunk's data on, and a read that waited for it would carry the
// stamp of whatever came after. A cut that is not an event's end (the
// response header's blank line) only costs a read.
func eventEnd(p []byte) int {
	// IndexByte finds each line end with vector instructions: a byte loop
	// here was 4% of the client's CPU at 10,800 streams.
	for i := 0; i < len(p); {
		k := bytes.IndexByte(p[i:], '\n')
		if k < 0 {
			break
		}
		i += k
		if i >= 1 && (p[i-1] == '\n' || (i >= 3 && p[i-1] == '\r' && p[i-2] == '\n' && p[i-3] == '\r')) {
			if i+2 < len(p) && p[i+1] == '\r' && p[i+2] == '\n' {
				return i + 3
			}
			return i + 1
		}
		i++
	}
	return len(p)
}
