package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// scrapeFlags are the telemetry flags of replay, sweep and capture: which
// Prometheus endpoints to poll during the run into RUN.metrics.parquet.
type scrapeFlags struct {
	targets  bool     // --scrape: every target's BASE/metrics
	urls     []string // --scrape-url, repeatable
	interval time.Duration
	timeout  time.Duration
	insecure bool // the command's --insecure
}

func (f *scrapeFlags) register(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&f.targets, "scrape", false, "poll each "+what+"'s BASE/metrics (Prometheus) during the run into RUN.metrics.parquet beside the recording")
	fs.StringArrayVar(&f.urls, "scrape-url", nil, "also poll this metrics URL (repeatable: a DCGM exporter, a router); implies scraping")
	fs.DurationVar(&f.interval, "scrape-interval", telemetry.DefaultInterval, "time between two scrapes of an endpoint")
	fs.DurationVar(&f.timeout, "scrape-timeout", 0, "limit of one scrape, request to last byte (0: the interval)")
}

// enabled reports whether anything is to be scraped.
func (f *scrapeFlags) enabled() bool { return f != nil && (f.targets || len(f.urls) > 0) }

// validate checks the flags; errors are bad input.
func (f *scrapeFlags) validate() error {
	if !f.enabled() {
		return nil
	}
	if f.interval <= 0 {
		return fmt.Errorf("--scrape-interval %v: expected a positive duration", f.interval)
	}
	if f.timeout < 0 {
		return fmt.Errorf("--scrape-timeout %v: expected a non-negative duration", f.timeout)
	}
	for _, raw := range f.urls {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--scrape-url %q: expected an http:// or https:// URL with a host", telemetry.Redact(raw))
		}
	}
	return nil
}

// endpoints are the URLs to poll for a run against targets.
func (f *scrapeFlags) endpoints(targets []string) []string {
	var eps []string
	if f.targets {
		for _, t := range targets {
			eps = append(eps, telemetry.MetricsURL(t))
		}
	}
	return append(eps, f.urls...)
}

// checkSidecar refuses an existing sidecar of recording unless force (the
// recording's own check is the command's).
func (f *scrapeFlags) checkSidecar(recording string, force bool) error {
	if !f.enabled() || force {
		return nil
	}
	p := trace.MetricsPath(recording)
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("%s exists: pass --force to replace it (the new sidecar replaces it only once complete)", p)
	}
	return nil
}

// sidecarOptions are the sidecar settings of a run against targets; the
// caller sets Recording or Path. The scraper has its own HTTP client and
// sends no API key: /metrics of vLLM, SGLang and TGI is not behind it,
// and a --scrape-url may be another party's exporter.
func (f *scrapeFlags) sidecarOptions(targets []string) telemetry.SidecarOptions {
	o := telemetry.SidecarOptions{Endpoints: f.endpoints(targets), Interval: f.interval, Timeout: f.timeout}
	if f.insecure {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		o.Client = &http.Client{Transport: tr}
	}
	return o
}

// runScrape is the scraping of one replay run.
type runScrape struct {
	sc   *telemetry.Sidecar
	meta *telemetry.MetaSink
}

// startRunScrape starts the sidecar of recording just before the run and
// returns the sink to give the run (sink, naming the sidecar in the run
// metadata). Scraping never fails the run: when the sidecar cannot be
// opened the run goes on without it, with a warning.
func startRunScrape(ctx context.Context, f *scrapeFlags, targets []string, recording string, force bool, sink record.Sink, stderr io.Writer) (*runScrape, record.Sink) {
	if !f.enabled() {
		return nil, sink
	}
	o := f.sidecarOptions(targets)
	o.Recording, o.Replace = recording, force
	sc, err := telemetry.StartSidecar(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "warning: not scraping server metrics: %v\n", err)
		return nil, sink
	}
	rs := &runScrape{sc: sc, meta: telemetry.NewMetaSink(sink, sc.Name())}
	return rs, rs.meta
}

// finish completes the sidecar after the run, before the recording is
// closed (so a sidecar that could not be completed is not named in it),
// and reports the endpoints that failed on stderr. It returns the
// sidecar's path, "" when there is none.
func (rs *runScrape) finish(stderr io.Writer) string {
	if rs == nil {
		return ""
	}
	res, err := rs.sc.Finish()
	for _, n := range res.Notes() {
		fmt.Fprintln(stderr, "scrape:", n)
	}
	if err != nil {
		rs.meta.Drop()
		fmt.Fprintf(stderr, "warning: the server metrics of this run are lost (the recording is not affected): %v\n", err)
		return ""
	}
	return res.Path
}

// captureScrape is the one sidecar of a capture run: segments rotate, the
// sidecar does not. It is OUT/capture-<start time>.metrics.parquet (the
// next free -2, -3... when taken, never replaced), and every segment's
// recording names it in RunMeta.Metrics, so analyze finds it from any
// segment and aligns it with each by its start time.
type captureScrape struct{ sc *telemetry.Sidecar }

// startCaptureScrape starts scraping the upstream (and --scrape-url) and
// sets cfg.Metrics; scraping never stops the capture: when the sidecar
// cannot be opened it warns and goes on without.
func startCaptureScrape(f *scrapeFlags, cfg *capture.ProxyConfig, stderr io.Writer) *captureScrape {
	if !f.enabled() {
		return nil
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "warning: not scraping server metrics: %v\n", err)
		return nil
	}
	o := f.sidecarOptions([]string{cfg.Upstream})
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for i := 1; i < 100; i++ {
		name := "capture-" + stamp
		if i > 1 {
			name += fmt.Sprintf("-%d", i)
		}
		o.Path = filepath.Join(cfg.OutDir, name+".metrics.parquet")
		sc, err := telemetry.StartSidecar(context.Background(), o)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "warning: not scraping server metrics: %v\n", err)
			return nil
		}
		cfg.Metrics = sc.Name()
		return &captureScrape{sc: sc}
	}
	fmt.Fprintf(stderr, "warning: not scraping server metrics: no free sidecar name in %s\n", cfg.OutDir)
	return nil
}

func (c *captureScrape) abort() {
	if c != nil {
		c.sc.Abort()
	}
}

// finish completes the sidecar after the segments; it returns its path,
// "" when there is none.
func (c *captureScrape) finish(stderr io.Writer) string {
	if c == nil {
		return ""
	}
	res, err := c.sc.Finish()
	for _, n := range res.Notes() {
		fmt.Fprintln(stderr, "scrape:", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warning: the server metrics of this capture are lost (the recordings name %s but it was not completed): %v\n", c.sc.Name(), err)
		return ""
	}
	return res.Path
}
