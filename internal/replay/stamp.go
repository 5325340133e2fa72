package replay

import (
	"strings"

	"github.com/tracekit/tracekit/internal/stamp"
	"github.com/tracekit/tracekit/trace"
)

// Stamp modes (Config.StampMode): how an event's arrival is stamped. The
// stamp package reads the kernel's receive stamps and says what each
// mode does and where it falls back.
const (
	StampGoroutine    = trace.StampGoroutine
	StampKernel       = trace.StampKernel
	StampKernelOffset = trace.StampKernelOffset
)

// DefaultStampMode is the mode of an empty Config.StampMode where the
// kernel supports it.
const DefaultStampMode = stamp.DefaultMode

// ParseStampMode checks a stamp mode; "" is the default.
func ParseStampMode(s string) (string, error) {
	switch s {
	case "", StampGoroutine, StampKernel, StampKernelOffset:
		return s, nil
	}
	return parseEnum("StampMode", s, StampGoroutine, StampKernel, StampKernelOffset)
}

// newStampSource settles the stamp mode of a run of cfg: the https://
// targets are read under TLS.
func newStampSource(cfg *Config) *stamp.Source {
	tls := 0
	for _, t := range cfg.Targets {
		if strings.HasPrefix(t, "https://") {
			tls++
		}
	}
	return stamp.New(cfg.StampMode, len(cfg.Targets), tls)
}

// bodyClock is the clock a response body read on c is stamped with: the
// run's clock in goroutine mode (or for a conn that is not ours), else the
// conn's last kernel receive stamp, run-relative.
func (r *runState) bodyClock(c *conn) func() int64 {
	if c == nil || c.rx == nil {
		return r.now
	}
	r.conns.start.Store(r.start)
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
