package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// newMockCmd builds the mock command.
func newMockCmd() *cobra.Command {
	d := mock.DefaultConfig()
	var (
		listen, configPath, logPath, tok, readyFile string
		cfg                                         = d // flag targets; only flags the user set are applied
		models                                      []string
	)
	cmd := &cobra.Command{
		Use:   "mock",
		Short: "Run an OpenAI-compatible mock LLM server with a latency model, faults and a ground-truth log",
		Long: `mock serves /v1/chat/completions, /v1/completions (streaming or not), /v1/models,
/health, /reset_prefix_cache and /metrics like vLLM, with a latency model:

  TTFT  = queue + prefill-base + prefill-per-token * (prompt tokens - cached tokens)
  ITL   = (decode-base + decode-per-seq * (running - 1)) * LogNormal(mean 1, cv jitter-cv)
  output = max_tokens if ignore_eos, else min(max_tokens, LogNormal(output-mean, output-cv))

Several models: --models a,b serves more names with the same latency; the
config's "models" list gives each name a partial latency override, e.g.
{"models":[{"name":"small","latency":{"decode_base":"5ms"}}]}. All share
one batch (--max-num-seqs) and one prefix cache. Requests beyond
--max-num-seqs wait. A prefix cache keyed by the message
history (--prefix-cache-tokens, LRU) makes turn k+1 of a conversation hit
what turn k computed. The X-Tracekit-Fault request header forces a fault:
status=429|500|503, reset, disconnect=N, stall=DUR[@N], malformed[@N], nodone,
slowheaders=DUR, noheaders (read the request, never answer), gzip (compress
the response whatever Accept-Encoding says), json (a plain JSON body for a
stream=true request), closeafter (close the connection after the response
without Connection: close) or idleclose=DUR (close this connection once it
has been idle for DUR after the response); the --fault-* flags set
per-request probabilities.

Connection behaviours of some real servers, server-wide: --idle-close DUR
closes a keep-alive connection idle (no request in flight, no byte
received) for DUR with a bare FIN, as uvicorn's timeout_keep_alive does
(vLLM: 5s); --close-after-response closes every connection after its
response without announcing it.

--emit-log writes the ground truth (Parquet): per request its id (the
X-Request-Id it was sent, or a generated one returned in that header),
arrival, and for every event the CLOCK_MONOTONIC ns right after its write
returned and its tokens. Settings come from the defaults, then --config
(JSON, same keys as 'mock.Config'), then the flags given.

Once serving it prints "tracekit mock: serving MODEL on URL" on stdout;
--ready-file PATH also writes {"url":"http://127.0.0.1:PORT",
"addr":"127.0.0.1:PORT","pid":N} to PATH (temp file + rename, so a reader
sees all of it or nothing) for programs that wait for it, and removes it at
exit. SIGINT or SIGTERM completes the log and stops it: exit 130 after
SIGINT, 0 after SIGTERM (a service manager's normal stop).`,
		Example: `  tracekit mock --listen 127.0.0.1:8000
  curl -N localhost:8000/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":8}'
  tracekit mock --decode-base 25ms --max-num-seqs 64 --emit-log truth.parquet
  tracekit mock --config mock.json --fault-503 0.01 --fault-disconnect 0.01 --seed 7
  tracekit mock --idle-close 5s      # drops idle keep-alive connections like vLLM's uvicorn`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			final := d
			if configPath != "" {
				var err error
				if final, err = mock.LoadConfig(configPath, d); err != nil {
					return badInput(err)
				}
			}
			applyChangedMockFlags(c, &final, cfg)
			for _, m := range models {
				final.Models = append(final.Models, mock.ModelConfig{Name: m})
			}
			final.Listen = listen
			if logPath != "" {
				final.LogPath = logPath
			}
			if tok != "approx" {
				t, err := tokenizer.Open(tok)
				if err != nil {
					return badInput(err)
				}
				final.Tokens = t
			}
			if err := final.Validate(); err != nil {
				return badInput(err)
			}
			return runMock(c, final, readyFile)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8000", "address to listen on (port 0 picks a free one)")
	f.StringVar(&configPath, "config", "", "JSON config file (keys of mock.Config)")
	f.StringVar(&logPath, "emit-log", "", "write the ground-truth log to this Parquet file")
	f.StringVar(&readyFile, "ready-file", "", `once serving, write {"url","addr","pid"} JSON here atomically (removed at exit)`)
	f.StringVar(&tok, "tokenizer", "approx", "prompt token counter: approx (ceil(len/4) per word), o200k_base, cl100k_base or a tokenizer.json path")
	f.StringVar(&cfg.Model, "model", d.Model, "served model name")
	f.StringSliceVar(&models, "models", nil, "more served model names, each with the base latency (per-model latency: the config's \"models\" list)")
	f.BoolVar(&cfg.StrictModel, "strict-model", d.StrictModel, "answer other model names with 404 like vLLM (default: accept any)")
	f.BoolVar(&cfg.StrictAnthropic, "strict-anthropic", d.StrictAnthropic, "require the anthropic-version header (400) and an API key (401) on /v1/messages, as Anthropic does (default: neither, as vLLM)")
	f.StringVar(&cfg.TranscriptionStream, "transcription-stream", "vllm", "shape of /v1/audio/transcriptions and translations answers: vllm (chat-shaped chunks, data: [DONE]) or openai (transcript.text.delta and .done events)")
	f.Int64Var(&cfg.Seed, "seed", d.Seed, "seed of output lengths, jitter, drawn faults and generated text")
	durationFlag(cmd, &cfg.IdleClose, "idle-close", "close a keep-alive connection idle this long after a response, silently, like uvicorn's timeout_keep_alive (0 = never)")
	f.BoolVar(&cfg.CloseAfterResponse, "close-after-response", d.CloseAfterResponse, "close every connection right after its response, without sending Connection: close")
	f.StringVar(&cfg.MediaCheck, "media-check", mock.MediaCheckFull, "how far images are checked: full (decode the pixels, as vLLM does: a damaged image gets a 400) or header (format and size only, no decoding CPU)")
	l := &cfg.Latency
	durationFlag(cmd, &l.PrefillBase, "prefill-base", "fixed prefill time")
	durationFlag(cmd, &l.PrefillPerToken, "prefill-per-token", "prefill time per uncached prompt token")
	durationFlag(cmd, &l.DecodeBase, "decode-base", "inter-token time with one running sequence")
	durationFlag(cmd, &l.DecodePerSeq, "decode-per-seq", "inter-token time added per other running sequence")
	f.Float64Var(&l.JitterCV, "jitter-cv", d.Latency.JitterCV, "coefficient of variation of the log-normal ITL jitter (0 = none)")
	f.IntVar(&l.TokensPerEvent, "tokens-per-event", d.Latency.TokensPerEvent, "tokens per SSE event after the first (k > 1 imitates speculative decoding)")
	f.IntVar(&l.SpecK, "spec-k", d.Latency.SpecK, "speculative decoding: draft tokens proposed per decode step (0 = off); each step streams 1 + the accepted ones as one event and counts vLLM's vllm:spec_decode_* counters")
	f.Float64Var(&l.SpecAccept, "spec-accept", d.Latency.SpecAccept, "speculative decoding: probability each draft token is accepted, in turn until the first rejection")
	f.IntVar(&l.MaxNumSeqs, "max-num-seqs", d.Latency.MaxNumSeqs, "batch capacity; further requests wait")
	f.IntVar(&l.OutputMean, "output-mean", d.Latency.OutputMean, "mean output tokens when ignore_eos is not set")
	f.Float64Var(&l.OutputCV, "output-cv", d.Latency.OutputCV, "coefficient of variation of the output length")
	f.IntVar(&l.ReasoningMean, "reasoning-mean", d.Latency.ReasoningMean, "mean reasoning tokens an answer starts with, within its output (0 = none; a request's X-Tracekit-Reasoning-Tokens sets it exactly)")
	f.Float64Var(&l.ReasoningCV, "reasoning-cv", d.Latency.ReasoningCV, "coefficient of variation of the reasoning length")
	f.IntVar(&l.MaxModelLen, "max-model-len", d.Latency.MaxModelLen, "context length (prompt + output)")
	f.IntVar(&l.PrefixCacheTokens, "prefix-cache-tokens", d.Latency.PrefixCacheTokens, "prefix cache capacity in tokens (0 disables)")
	fr := &cfg.Faults
	for _, p := range []struct {
		v    *float64
		name string
	}{{&fr.Status429, "429"}, {&fr.Status500, "500"}, {&fr.Status503, "503"}, {&fr.Reset, "reset"}, {&fr.Disconnect, "disconnect"},
		{&fr.Stall, "stall"}, {&fr.Malformed, "malformed"}, {&fr.NoDone, "nodone"}, {&fr.SlowHeaders, "slowheaders"},
		{&fr.NoHeaders, "noheaders"}, {&fr.Gzip, "gzip"}, {&fr.JSON, "json"}, {&fr.Error, "error"}} {
		f.Float64Var(p.v, "fault-"+p.name, 0, "probability of the "+p.name+" fault per request")
	}
	durationFlag(cmd, &fr.StallFor, "stall-for", "length of a drawn stall fault")
	durationFlag(cmd, &fr.SlowHeadersFor, "slowheaders-for", "delay of a drawn slowheaders fault")
	return cmd
}

// durationFlag registers a mock.Duration flag with its current value as default.
func durationFlag(cmd *cobra.Command, v *mock.Duration, name, usage string) {
	cmd.Flags().DurationVar((*time.Duration)(v), name, v.D(), usage)
}

// applyChangedMockFlags copies into dst the settings of the flags the user
// gave, so they override the config file while the others keep its values.
func applyChangedMockFlags(c *cobra.Command, dst *mock.Config, src mock.Config) {
	set := c.Flags().Changed
	pick := func(name string, apply func()) {
		if set(name) {
			apply()
		}
	}
	pick("model", func() { dst.Model = src.Model })
	pick("strict-model", func() { dst.StrictModel = src.StrictModel })
	pick("strict-anthropic", func() { dst.StrictAnthropic = src.StrictAnthropic })
	pick("seed", func() { dst.Seed = src.Seed })
	pick("transcription-stream", func() { dst.TranscriptionStream = src.TranscriptionStream })
	pick("idle-close", func() { dst.IdleClose = src.IdleClose })
	pick("close-after-response", func() { dst.CloseAfterResponse = src.CloseAfterResponse })
	pick("media-check", func() { dst.MediaCheck = src.MediaCheck })
	l, s := &dst.Latency, src.Latency
	pick("prefill-base", func() { l.PrefillBase = s.PrefillBase })
	pick("prefill-per-token", func() { l.PrefillPerToken = s.PrefillPerToken })
	pick("decode-base", func() { l.DecodeBase = s.DecodeBase })
	pick("decode-per-seq", func() { l.DecodePerSeq = s.DecodePerSeq })
	pick("jitter-cv", func() { l.JitterCV = s.JitterCV })
	pick("tokens-per-event", func() { l.TokensPerEvent = s.TokensPerEvent })
	pick("spec-k", func() { l.SpecK = s.SpecK })
	pick("spec-accept", func() { l.SpecAccept = s.SpecAccept })
	pick("max-num-seqs", func() { l.MaxNumSeqs = s.MaxNumSeqs })
	pick("output-mean", func() { l.OutputMean = s.OutputMean })
	pick("output-cv", func() { l.OutputCV = s.OutputCV })
	pick("reasoning-mean", func() { l.ReasoningMean = s.ReasoningMean })
	pick("reasoning-cv", func() { l.ReasoningCV = s.ReasoningCV })
	pick("max-model-len", func() { l.MaxModelLen = s.MaxModelLen })
	pick("prefix-cache-tokens", func() { l.PrefixCacheTokens = s.PrefixCacheTokens })
	f, sf := &dst.Faults, src.Faults
	pick("fault-429", func() { f.Status429 = sf.Status429 })
	pick("fault-500", func() { f.Status500 = sf.Status500 })
	pick("fault-503", func() { f.Status503 = sf.Status503 })
	pick("fault-reset", func() { f.Reset = sf.Reset })
	pick("fault-disconnect", func() { f.Disconnect = sf.Disconnect })
	pick("fault-stall", func() { f.Stall = sf.Stall })
	pick("fault-malformed", func() { f.Malformed = sf.Malformed })
	pick("fault-nodone", func() { f.NoDone = sf.NoDone })
	pick("fault-slowheaders", func() { f.SlowHeaders = sf.SlowHeaders })
	pick("fault-noheaders", func() { f.NoHeaders = sf.NoHeaders })
	pick("fault-gzip", func() { f.Gzip = sf.Gzip })
	pick("fault-json", func() { f.JSON = sf.JSON })
	pick("fault-error", func() { f.Error = sf.Error })
	pick("stall-for", func() { f.StallFor = sf.StallFor })
	pick("slowheaders-for", func() { f.SlowHeadersFor = sf.SlowHeadersFor })
}

// runMock serves until SIGINT or SIGTERM, then cuts in-flight streams and
// completes the log: exit 130 after SIGINT, 0 after SIGTERM (a service
// manager's stop), as capture.
func runMock(c *cobra.Command, cfg mock.Config, readyFile string) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	srv, err := mock.Start(cfg)
	if err != nil {
		return err
	}
	if readyFile != "" {
		if err := mock.WriteReadyFile(readyFile, srv.Ready()); err != nil {
			srv.Close()
			return fmt.Errorf("--ready-file: %w", err)
		}
		defer os.Remove(readyFile) // a stale file would claim a mock that is gone
	}
	fmt.Fprintf(c.OutOrStdout(), "tracekit mock: serving %s on %s\n", cfg.Model, srv.URL())
	sig := <-sigs
	signal.Stop(sigs) // a second signal kills at once
	err = srv.Close()
	st := srv.Stats()
	fmt.Fprintf(c.ErrOrStderr(), "tracekit mock: stopped after %d requests, %d events, event lateness p50 %s p99 %s max %s\n",
		st.Requests, st.Events, trace.FormatDuration(st.LatenessP50Ns), trace.FormatDuration(st.LatenessP99Ns), trace.FormatDuration(st.LatenessMaxNs))
	if err != nil {
		return fmt.Errorf("closing the mock: %w", err)
	}
	if cfg.LogPath != "" {
		fmt.Fprintf(c.ErrOrStderr(), "tracekit mock: ground-truth log complete: %s\n", cfg.LogPath)
	}
	if sig == os.Interrupt {
		return interrupted(nil)
	}
	return nil
}
