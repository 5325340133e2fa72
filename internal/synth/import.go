package synth

import (
	"math"
	"strconv"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// ImportOptions are the options every production-trace source (mooncake,
// azure, burstgpt, bailian) shares.
//
// Timing: each source has a timeline (Mooncake, BurstGPT and Bailian
// timestamps are already relative to the trace start; Azure's wall-clock
// timestamps are taken relative to the file's earliest row). The window keeps
// the requests whose timestamp t satisfies Start <= t < Start+Duration, and a
// kept request arrives at (t - Start) / Speed in the trace: the trace's zero
// is the window's start, so the idle time before its first request is kept.
type ImportOptions struct {
	Path           string        // the file to import
	Start          time.Duration // window start on the source's timeline
	Duration       time.Duration // window length; 0 keeps everything after Start
	Speed          float64       // time compression: 2 replays twice as fast; 0 means 1
	MaxInputTokens int           // clamp of each request's prompt length; 0 means none
	Limit          int           // keep the first Limit conversations of the window; 0 means all
	Model          string        // stamped on every turn (trace.Turn.Model); empty leaves it to replay
	SkipBad        bool          // count and skip malformed rows instead of failing
	BlockSize      int           // tokens per prefix-hash block; 0 means the source's default
	// Corpus supplies the words prompts are made of; nil means DefaultCorpus
	// under the default tokenizer.
	Corpus *Corpus
	// MaxBytes refuses an import whose prompts (after the window, limit and
	// clamp) are estimated above it, once the conversations built so far
	// pass it; 0 means no limit.
	MaxBytes int64
	// GroupWindow bounds the import's memory (see rowStream): rows out of
	// time order by up to this much are placed in order (a row earlier than
	// one already placed, which is more than this older than the latest
	// row, is refused), and a multi-turn conversation (a BurstGPT session, a
	// Bailian chain) that no row joined for this long on the source's
	// timeline is complete (a later row that would join it is refused).
	// 0 means DefaultGroupWindow.
	GroupWindow time.Duration
	// PromptText stores every prompt's text in the trace. By default an
	// import over the default corpus (Corpus nil, or DefaultCorpus under
	// an embedded tokenizer) writes virtual prompts instead: lengths, the
	// block hashes and a seed (trace.Message.Virtual), from which replay
	// makes the same text. With another corpus the text is stored.
	PromptText bool
}

// ImportStats says what an import did with the rows of its file. It is
// filled by Conversations and recorded in the trace metadata.
type ImportStats struct {
	Rows          int      // well-formed rows read
	BadRows       int      // malformed rows skipped (--skip-bad)
	BadExamples   []string // the first few of them
	Filtered      int      // rows dropped by a source filter (model, log type, failed)
	OutsideWindow int      // rows before Start or at/after Start+Duration
	OverLimit     int      // rows of conversations past --limit
	Clamped       int      // requests whose prompt was cut to --max-input-tokens
	InvalidUTF8   int64    // bytes of the file that are not UTF-8 (replaced by U+FFFD where they reach text)
	// Prompts is the generator of the virtual prompts written; nil when
	// they hold their text.
	Prompts       *trace.PromptGenerator
	Requests      int // rows written
	Conversations int
	SourceSpanNs  int64 // last minus first timestamp of all well-formed rows
	TraceSpanNs   int64 // last minus first arrival of the written requests
}

func (o ImportOptions) validate(defaultBlock int) (ImportOptions, error) {
	const st = "ImportOptions"
	switch {
	case o.Path == "":
		return o, fieldErr(st, "Path", "no input file")
	case o.Start < 0:
		return o, fieldErr(st, "Start", "window start %v must not be negative", o.Start)
	case o.Duration < 0:
		return o, fieldErr(st, "Duration", "window duration %v must not be negative", o.Duration)
	case o.Speed < 0 || math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0):
		return o, fieldErr(st, "Speed", "speed %g must be a positive number", o.Speed)
	case o.MaxInputTokens < 0:
		return o, fieldErr(st, "MaxInputTokens", "max input tokens %d must not be negative", o.MaxInputTokens)
	case o.Limit < 0:
		return o, fieldErr(st, "Limit", "limit %d must not be negative", o.Limit)
	case o.BlockSize < 0:
		return o, fieldErr(st, "BlockSize", "block size %d must not be negative", o.BlockSize)
	case o.GroupWindow < 0:
		return o, fieldErr(st, "GroupWindow", "grouping window %v must not be negative", o.GroupWindow)
	}
	if o.GroupWindow == 0 {
		o.GroupWindow = DefaultGroupWindow
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlock
	}
	return o, nil
}

// importRow is one request as read from a file, before windowing.
type importRow struct {
	line    int
	at      int64  // ns on the source's timeline
	group   string // conversation key assigned by the source's grouping
	input   int    // full prompt tokens as recorded (history included)
	output  int
	hashes  []int64 // prefix-block hashes of the full prompt; nil when unknown
	elapsed int64   // ns the request took in production; 0 when unknown
	failed  bool
	// chat and parent are Bailian's chat links.
	chat, parent int64
}

// scale maps a timeline instant to a trace offset: (t - from) / speed.
func (o ImportOptions) scale(d int64) int64 {
	if o.Speed == 1 {
		return d
	}
	return int64(float64(d) / o.Speed)
}

// turnTokens is turn k's prompt tokens (at least 1, clamped to
// MaxInputTokens), the tokens of its new message and whether it was clamped.
func (o ImportOptions) turnTokens(rows []importRow, k int) (in, msg int, clamped bool) {
	clampIn := func(r importRow) (int, bool) {
		in := max(r.input, 1)
		if o.MaxInputTokens > 0 && in > o.MaxInputTokens {
			return o.MaxInputTokens, true
		}
		return in, false
	}
	in, clamped = clampIn(rows[k])
	if k == 0 {
		return in, in, clamped
	}
	prevIn, _ := clampIn(rows[k-1])
	return in, max(in-prevIn-max(rows[k-1].output, 1), 1), clamped
}

// conversation builds the turns of one group; virtual leaves the text to
// replay (trace.Message.Virtual).
func (o ImportOptions) conversation(id string, from int64, rows []importRow, blocks *Blocks, virtual bool, st *ImportStats) Conversation {
	c := make(Conversation, len(rows))
	var prevAt, prevElapsed int64
	for k, r := range rows {
		in, msg, clamped := o.turnTokens(rows, k)
		if clamped {
			st.Clamped++
		}
		hashes := r.hashes
		if nb := (in + blocks.Size() - 1) / blocks.Size(); len(hashes) > nb {
			hashes = hashes[:nb]
		}
		// The new message covers the last msg tokens of the recorded
		// prompt; it is built from the blocks that lie wholly inside them.
		skip := min((in-msg+blocks.Size()-1)/blocks.Size(), len(hashes))
		at := o.scale(r.at - from)
		m := trace.Message{Role: "user", Tokens: int32(msg)}
		if virtual {
			m.Virtual, m.BlockStart, m.BlockSeed = true, int32(skip), int64(r.line)
		} else {
			m.Content = blocks.Text(hashes[skip:], msg, int64(r.line))
		}
		t := trace.Turn{
			ConversationID:  id,
			Turn:            int32(k),
			ArrivalOffsetNs: at,
			Messages:        []trace.Message{m},
			InputTokens:     int32(msg),
			OutputTokens:    int32(max(r.output, 1)),
			Model:           o.Model,
		}
		if len(hashes) > 0 {
			t.PrefixHashes = append([]int64(nil), hashes...)
		}
		if k > 0 {
			t.ThinkTimeNs = max(at-prevAt-o.scale(prevElapsed), 0)
		}
		c[k] = t
		prevAt, prevElapsed = at, r.elapsed
	}
	for k := range c {
		c[k].StartOffsetNs = c[0].ArrivalOffsetNs
	}
	return c
}

// metaOptions records the source, the window and the options, with the
// import's counts, for TraceMeta.Options.
func (o ImportOptions) metaOptions(st ImportStats) map[string]string {
	ns := func(d int64) string { return time.Duration(d).String() }
	m := map[string]string{
		"input":               o.Path,
		"window_start":        o.Start.String(),
		"window_duration":     "all",
		"speed":               strconv.FormatFloat(o.Speed, 'g', -1, 64),
		"max_input_tokens":    strconv.Itoa(o.MaxInputTokens),
		"limit":               strconv.Itoa(o.Limit),
		"model":               o.Model,
		"skip_bad":            strconv.FormatBool(o.SkipBad),
		"block_size":          strconv.Itoa(o.BlockSize),
		"group_window":        o.GroupWindow.String(),
		"prompts":             "text",
		"rows":                strconv.Itoa(st.Rows),
		"bad_rows":            strconv.Itoa(st.BadRows),
		"filtered_rows":       strconv.Itoa(st.Filtered),
		"outside_window_rows": strconv.Itoa(st.OutsideWindow),
		"over_limit_rows":     strconv.Itoa(st.OverLimit),
		"clamped_requests":    strconv.Itoa(st.Clamped),
		"requests":            strconv.Itoa(st.Requests),
		"conversations":       strconv.Itoa(st.Conversations),
		"source_span":         ns(st.SourceSpanNs),
		"trace_span":          ns(st.TraceSpanNs),
	}
	if o.Duration > 0 {
		m["window_duration"] = o.Duration.String()
	}
	if st.Prompts != nil {
		m["prompts"] = "virtual"
	}
	for i, e := range st.BadExamples {
		m["bad_row_"+strconv.Itoa(i+1)] = e
	}
	addUTF8Report(m, reportInvalidUTF8, st.InvalidUTF8)
	if o.Corpus != nil {
		addUTF8Report(m, reportTextInvalidUTF8, o.Corpus.InvalidUTF8())
	}
	return m
}
