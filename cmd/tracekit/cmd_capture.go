package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/tokenizer"
)

// newCaptureCmd builds the capture command.
func newCaptureCmd() *cobra.Command {
	var (
		cfg         capture.ProxyConfig
		listen, tok string
		stack       string
		rotateMB    int64
		allowRemote bool
		check       bool
		grace       time.Duration
		scrape      scrapeFlags
		progress    string
		lf          liveFlags
	)
	cmd := &cobra.Command{
		Use:   "capture --upstream URL --out DIR",
		Short: "Run a recording proxy that turns live traffic into a replayable trace",
		Long: `capture sits in front of an OpenAI-compatible server and passes every request
and every streamed event through untouched, flushing each read at once. It
writes what it saw into DIR as pairs of files: a trace (conversations grouped
by message history, arrival times, think times, messages, parameters), which
'tracekit replay' can send again, and a recording (the upstream's token event
times), which 'tracekit analyze' reads. Files rotate by time or size and each
is valid; Ctrl-C or SIGTERM finishes them. Authorization and API-key headers
are forwarded but never written. After a SIGKILL, 'tracekit recover DIR'
restores the traces and recordings from their journals (fsync'd every
--sync-every).

Files are named capture-<start time>-<segment>.{trace,recording}.parquet; a
name already taken in DIR (an earlier run's files, or the journals of a killed
one) is never replaced: the segment takes the next free name, <name>-2, -3...,
and says so on stderr. Requests carrying X-Tracekit-Probe (tracekit's own
probes) are forwarded but never recorded. Requests without "stream": true are
recorded as non-streaming. LLM endpoints capture cannot parse (Ollama's
/api/chat, /api/generate, ...) are forwarded unrecorded, with one warning per
path.

Exit codes: 0 stopped by SIGTERM with the files complete, 130 stopped by
Ctrl-C (SIGINT) with the files complete, 1 the upstream was not reachable at
start (see --check-upstream) or a file could not be completed, 2 bad flags.`,
		Example: `  tracekit capture --upstream http://127.0.0.1:8000 --out captured/
  tracekit capture --listen 127.0.0.1:9000 --upstream https://llm.internal --out cap/ --session-header X-Session-Id --redact-content`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if cfg.Upstream == "" || cfg.OutDir == "" {
				return badInput(errors.New("--upstream and --out are required"))
			}
			if u, err := url.Parse(cfg.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return badInput(fmt.Errorf("--upstream %q: expected an http:// or https:// URL with a host", cfg.Upstream))
			}
			if host, _, err := net.SplitHostPort(listen); err != nil {
				return badInput(fmt.Errorf("--listen %q: %w", listen, err))
			} else if !allowRemote && !isLoopback(host) {
				return badInput(fmt.Errorf("--listen %q is not a loopback address; add --allow-remote to expose the proxy", listen))
			}
			st, err := h1proxy.ParseStack(stack)
			if err != nil {
				return badInput(fmt.Errorf("--proxy-stack: %w", err))
			}
			cfg.Stack = st
			t, err := tokenizer.Open(tok)
			if err != nil {
				return badInput(err)
			}
			cfg.Tokenizer = t
			cfg.RotateBytes = rotateMB << 20
			cfg.Command = replay.RedactCommand(os.Args)
			cfg.Scrub = redact.FromContext(c.Context())
			cfg.Logf = func(format string, args ...any) { fmt.Fprintf(c.ErrOrStderr(), format+"\n", args...) }
			if err := scrape.validate(); err != nil {
				return badInput(err)
			}
			scrape.insecure = cfg.InsecureSkipVerify
			switch progress {
			case "none", "plain", "dashboard":
			default:
				return badInput(fmt.Errorf("--progress %q: expected none, plain or dashboard", progress))
			}
			if err := lf.validate(); err != nil {
				return badInput(err)
			}
			return runCapture(c, cfg, listen, grace, check, &scrape, captureView{progress: progress, live: &lf})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:9000", "address to listen on")
	f.BoolVar(&allowRemote, "allow-remote", false, "allow --listen on a non-loopback address")
	f.StringVar(&cfg.Upstream, "upstream", "", "base URL of the server to forward to (http:// or https://)")
	f.StringVar(&cfg.OutDir, "out", "", "directory for the trace and recording files")
	f.StringVar(&cfg.SessionHeader, "session-header", "", "request header naming the conversation (default: group by message history)")
	f.BoolVar(&cfg.RedactContent, "redact-content", false, "keep token counts, not text, in the trace, and each media item as a synthetic one of its shape")
	f.DurationVar(&cfg.RotateEvery, "rotate-every", time.Hour, "start new files after this long")
	f.Int64Var(&rotateMB, "rotate-size", 256, "start new files once this many MiB of trace text are buffered")
	f.DurationVar(&cfg.SyncEvery, "sync-every", time.Second, "fsync the recording and trace journals this often (the most a SIGKILL loses)")
	f.StringVar(&tok, "tokenizer", tokenizer.DefaultName, "tokenizer for token counts: o200k_base, cl100k_base or a tokenizer.json path")
	f.BoolVar(&cfg.InsecureSkipVerify, "insecure", false, "accept any TLS certificate from the upstream")
	f.BoolVar(&check, "check-upstream", true, "at start, send the upstream one probe request and exit 1 if it is unreachable")
	f.StringVar(&stack, "proxy-stack", string(h1proxy.Native), "HTTP layer that forwards the traffic: native (capture's own HTTP/1.1 server and client, tuned to add the least delay per event) or net/http (Go's standard server and transport, as a reference or a fallback); both forward the same bytes and record the same")
	f.DurationVar(&grace, "grace", 10*time.Second, "on Ctrl-C/SIGTERM, how long in-flight streams may finish before being cut")
	f.StringVar(&progress, "progress", "none", "none, plain (a line of the calls recorded every 10 s) or dashboard (live figures on a terminal, else the plain line)")
	lf.register(f)
	scrape.register(f, "upstream")
	return cmd
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runCapture serves until SIGINT/SIGTERM, then finishes the files: exit
// 130 after SIGINT, 0 after SIGTERM (a service manager's stop), 1 when a
// file could not be completed.
func runCapture(cmd *cobra.Command, cfg capture.ProxyConfig, listen string, grace time.Duration, check bool, scrape *scrapeFlags, view captureView) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sc := startCaptureScrape(scrape, &cfg, cmd.ErrOrStderr())
	cl := newCaptureLive(view, &cfg, cmd.ErrOrStderr())
	ps, err := capture.StartProxy(cfg, listen)
	if err != nil {
		sc.abort()
		return runFailed(err)
	}
	if check {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := ps.CheckUpstream(ctx)
		cancel()
		if err != nil {
			ps.Close()
			sc.abort()
			return runFailed(fmt.Errorf("%w (start the server first, or pass --check-upstream=false)", err))
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "capture: %s -> %s, writing to %s (Ctrl-C to finish)\n", ps.URL(), cfg.Upstream, cfg.OutDir)
	cl.start(ps.Proxy(), sc)
	sig := <-sigs
	signal.Stop(sigs) // a second signal kills at once
	fmt.Fprintf(cmd.ErrOrStderr(), "capture: %v: finishing files...\n", sig)
	err = ps.Shutdown(grace)
	cl.stop() // after the last segment's records went through the tap
	for _, s := range ps.Proxy().Segments() {
		media := ""
		if s.Media != "" {
			media = ", media " + s.Media
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%d requests: trace %s, recording %s%s\n", s.Requests, s.Trace, s.Recording, media)
	}
	if p := sc.finish(cmd.ErrOrStderr()); p != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "server metrics: %s\n", p)
	}
	if err != nil {
		return runFailed(fmt.Errorf("finishing the capture files: %w", err))
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "capture: files complete")
	if sig == os.Interrupt {
		return interrupted(nil)
	}
	return nil
}
