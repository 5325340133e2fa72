package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/trace"
)

// captureView is capture's --progress and --serve-ui.
type captureView struct {
	progress string // none, plain or dashboard
	live     *liveFlags
}

// captureLive is what capture shows while it runs: the calls recorded,
// counted from the proxy's tap (the segment recorders' writer goroutines,
// never the forwarding path), the live view and the progress line.
type captureLive struct {
	label         string
	stderr        io.Writer
	live          *liveFlags
	dashboard     bool // draw the terminal dashboard
	plain         bool // print a line every 10 s
	done, failed  atomic.Int64
	feed          *live.Feed // nil: no live view
	lv            *liveRun
	quit, quitted chan struct{} // the line's goroutine
}

// captureLineEvery is how often the plain progress line is printed.
const captureLineEvery = 10 * time.Second

// newCaptureLive sets cfg.Tap when the capture shows anything; nil when it
// shows nothing (--progress none without --serve-ui).
func newCaptureLive(v captureView, cfg *capture.ProxyConfig, stderr io.Writer) *captureLive {
	page := v.live != nil && v.live.serveUI != ""
	if v.progress == "none" && !page {
		return nil
	}
	c := &captureLive{label: "capture " + cfg.OutDir, stderr: stderr, live: v.live}
	c.dashboard = v.progress == "dashboard" && isTerminal(stderr)
	c.plain = v.progress == "plain" || (v.progress == "dashboard" && !c.dashboard)
	if v.progress == "dashboard" && !c.dashboard {
		fmt.Fprintln(stderr, "--progress dashboard: stderr is not a terminal, printing a progress line every 10 s instead")
	}
	if c.dashboard || page {
		c.feed = live.NewFeed(0)
	}
	cfg.Tap = func(rec *trace.Record, segStartNs int64) {
		c.done.Add(1)
		if rec.ErrorKind != "" {
			c.failed.Add(1)
		}
		c.feed.OfferAt(rec, segStartNs) // a nil feed ignores it
	}
	return c
}

// start shows the figures of p (and of the scrape sidecar, when there is
// one) until stop.
func (c *captureLive) start(p *capture.Proxy, sc *captureScrape) {
	if c == nil {
		return
	}
	counts := func() live.Counts {
		inFlight := int64(p.InFlight())
		done := c.done.Load()
		return live.Counts{Done: done, Failed: c.failed.Load(), InFlight: inFlight, Sent: done + inFlight, Elapsed: p.Elapsed()}
	}
	if c.feed != nil {
		src := live.Sources{Counts: counts}
		if sc != nil {
			src.Server = scrapeGauges(sc.sc)
		}
		c.lv = startLive(c.feed, src, c.label, c.dashboard, c.live, c.stderr)
	}
	if c.plain {
		c.quit, c.quitted = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(c.quitted)
			t := time.NewTicker(captureLineEvery)
			defer t.Stop()
			for {
				select {
				case <-c.quit:
					return
				case <-t.C:
					fmt.Fprintln(c.stderr, captureLine(counts()))
				}
			}
		}()
	}
}

// captureLine is the plain progress line.
func captureLine(n live.Counts) string {
	return fmt.Sprintf("capture: %d calls recorded (%d failed), %d in flight, %s elapsed", n.Done, n.Failed, n.InFlight, n.Elapsed.Truncate(time.Second))
}

// stop ends the line and the live view (the page's last event is
// finished); call it once the proxy is shut down, so every record went
// through the tap.
func (c *captureLive) stop() {
	if c == nil {
		return
	}
	if c.quit != nil {
		close(c.quit)
		<-c.quitted
		c.quit = nil
	}
	c.lv.stop()
	c.lv = nil
}
