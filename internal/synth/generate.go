package synth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/tracekit/tracekit/internal/fnv1a"
	"github.com/tracekit/tracekit/trace"
)

// ErrNoConversations is returned when a source yields nothing to write
// (everything was filtered out).
var ErrNoConversations = errors.New("no conversation left")

// OutputError is a failure to write the trace (disk full, no permission),
// as opposed to a problem with the input.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// Job is one trace to make: a source, how to schedule it, where to write.
type Job struct {
	Source Source
	// Schedule sets start and arrival offsets; nil for sources that set
	// their own (the production-trace imports).
	Schedule *Schedule
	Meta     trace.TraceMeta // Source is filled from Source.Name()
	Output   string
	// Replace lets the trace replace an existing Output (once it is
	// complete). Without it Generate refuses an existing Output before any
	// work, and never replaces one that appears while it writes: either is
	// an *OutputError wrapping fs.ErrExist.
	Replace bool
	// Endpoint, when not "", is stamped on every turn whose Endpoint is
	// "" (trace.Turn.Endpoint): the API the whole trace is sent on.
	Endpoint string
	// Reasoning, when not nil, is the reasoning tokens each answer of a
	// generating API starts with (trace.Turn.ReasoningTokens), drawn per
	// turn and added to its OutputTokens: the visible answer keeps its
	// length, max_tokens covers both, as a reasoning model spends them.
	Reasoning Dist
	// Models, when not empty, gives each conversation the model of one of
	// its entries (trace.Turn.Model on every turn that names none), drawn
	// with the weights given: a traffic split over models or LoRA
	// adapters behind one endpoint.
	Models []WeightedModel
	// Media, when not nil, is the media each turn's user message carries.
	Media *MediaOptions
}

// WeightedModel is a model name and its share of the conversations.
type WeightedModel struct {
	Name   string
	Weight float64
}

// Result summarises a written trace.
type Result struct {
	Conversations int
	Turns         int
	Bytes         int64
	Report        map[string]string // the source's Reporter output, if any
	// MediaItems and MediaBytes are what a MediaImporter stored in the
	// trace's media file (trace.MediaPath): distinct items and their bytes.
	MediaItems int
	MediaBytes int64
}

// Generate runs the source, schedules and writes the trace to a temporary
// file renamed to Output when complete (over an existing Output only with
// Replace): a failed or interrupted Generate leaves Output as it was.
// The source's report, when it has one, is stored in Meta.Options under
// "report.<key>". When ctx ends first the error is ctx's.
func Generate(ctx context.Context, job Job) (Result, error) {
	var res Result
	if !job.Replace {
		if _, err := os.Lstat(job.Output); err == nil {
			return res, &OutputError{Err: fmt.Errorf("%s: %w", job.Output, fs.ErrExist)}
		}
	}
	if st, ok := job.Source.(Streamer); ok && job.Schedule == nil {
		if err := writeStream(ctx, job.Output, job.Replace, job.Meta, st, job.finish, &res); err != nil {
			return res, err
		}
		res.Bytes = fileSize(job.Output)
		return res, nil
	}
	var mw *trace.MediaWriter
	if mi, ok := job.Source.(MediaImporter); ok {
		var err error
		if mw, err = trace.NewMediaWriter(trace.MediaPath(job.Output), job.Replace); err != nil {
			return res, &OutputError{Err: err}
		}
		defer mw.Abort() // no-op once closed
		mi.UseMediaWriter(mw)
	}
	convs, err := job.Source.Conversations(ctx)
	if err != nil {
		return Result{}, err
	}
	if rep, ok := job.Source.(Reporter); ok {
		res.Report = rep.Report()
	}
	// drop empty conversations defensively: Write indexes turn 0
	kept := convs[:0]
	for _, c := range convs {
		if len(c) > 0 {
			kept = append(kept, c)
			res.Turns += len(c)
		}
	}
	convs = kept
	res.Conversations = len(convs)
	if len(convs) == 0 {
		return res, fmt.Errorf("%s source: %w", job.Source.Name(), ErrNoConversations)
	}
	if job.Schedule != nil {
		job.Schedule.Apply(convs, job.Meta.Seed)
	}
	for _, c := range convs {
		job.finish(c)
	}
	meta := withReport(job.Meta, job.Source.Name(), res.Report)
	if p, ok := job.Source.(Prompter); ok {
		meta.Prompts = p.Prompts()
	}
	// The media file goes into place first: a trace is never left naming
	// items no file holds, only (on a failure between the two) a media
	// file without its trace, removed below when it is new.
	var newMedia string
	if mw != nil {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		_, statErr := os.Lstat(mw.Path())
		if err := mw.Close(); err != nil {
			return res, &OutputError{Err: err}
		}
		if statErr != nil {
			newMedia = mw.Path()
		}
		res.MediaItems, res.MediaBytes = mw.Items(), mw.Bytes()
	}
	if err := Write(ctx, job.Output, job.Replace, meta, convs); err != nil {
		if newMedia != "" {
			os.Remove(newMedia)
		}
		if ctx.Err() != nil {
			return res, err
		}
		return res, &OutputError{Err: err}
	}
	res.Bytes = fileSize(job.Output)
	return res, nil
}

// withReport is meta with its source named and the source's report stored
// in Options under "report.<key>".
func withReport(meta trace.TraceMeta, source string, report map[string]string) trace.TraceMeta {
	meta.Source = source
	if len(report) > 0 {
		opts := make(map[string]string, len(meta.Options)+len(report))
		for k, v := range meta.Options {
			opts[k] = v
		}
		for k, v := range report {
			opts["report."+k] = v
		}
		meta.Options = opts
	}
	return meta
}

func fileSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// CreatedAt is the trace's creation time: SOURCE_DATE_EPOCH (seconds since
// the Unix epoch, the reproducible-builds convention) when set, so that a
// fixed environment gives byte-identical traces, else now.
func CreatedAt() (string, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH=%q is not an integer number of seconds", s)
		}
		return time.Unix(sec, 0).UTC().Format(time.RFC3339), nil
	}
	return time.Now().UTC().Format(time.RFC3339), nil
}

// finish sets what the job adds to every conversation c of its source:
// the endpoint of turns that have none, the media of user messages
// (MediaOptions.apply), then the reasoning tokens of the generating ones. The reasoning draws of a conversation come from a
// generator seeded by the trace's seed and the conversation's id, so they
// do not depend on the order conversations are written in.
func (job *Job) finish(c Conversation) {
	for k := range c {
		if c[k].Endpoint == "" {
			c[k].Endpoint = job.Endpoint
		}
	}
	if job.Media != nil {
		job.Media.apply(c, job.Meta.Seed)
	}
	if len(c) == 0 {
		return
	}
	if len(job.Models) > 0 {
		m := pickModel(job.Models, rand.New(rand.NewPCG(uint64(job.Meta.Seed), fnv1a.String("model/"+c[0].ConversationID))))
		for k := range c {
			if c[k].Model == "" {
				c[k].Model = m
			}
		}
	}
	if job.Reasoning == nil {
		return
	}
	r := rand.New(rand.NewPCG(uint64(job.Meta.Seed), fnv1a.String(c[0].ConversationID)))
	for k := range c {
		ep := c[k].Endpoint
		if ep != "" && (!trace.Generates(ep) || ep == trace.EndpointCompletions) {
			continue
		}
		n := sampleInt(job.Reasoning, r)
		c[k].ReasoningTokens = int32(n)
		c[k].OutputTokens = int32(min(int64(c[k].OutputTokens)+int64(n), maxTokens))
	}
}
