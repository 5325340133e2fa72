package capture

import (
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// The figures a live view polls while the proxy runs (the finished calls
// come through ProxyConfig.Tap).

// InFlight counts the LLM calls being forwarded now (from their request's
// arrival to their response's end).
func (p *Proxy) InFlight() int {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	return p.active
}

// Elapsed is the time since the proxy started, the clock of Tap's
// segStartNs.
func (p *Proxy) Elapsed() time.Duration { return time.Duration(clock.Mono() - p.runStart) }
