package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tracekit/tracekit/record"
	"github.com/tracekit/tracekit/trace"
)

// segment is one pair of output files: the requests that arrived while it
// was current. Its recording is written as records come (crash-safe through
// the record.Recorder's journal); its trace is written when it closes, because a
// trace's rows are sorted by conversation start with each conversation's
// turns together. It closes once rotated and its last request has ended.
type segment struct {
	n           int
	origin      int64 // mono ns of the first arrival: time 0 of both files
	meta        trace.RunMeta
	recOpts     record.RecorderOptions
	open        sync.Once // creates rec off the request path
	rec         *record.Recorder
	openErr     error
	base        string // path prefix the files' names start from
	tracePath   string // set when the files are created (a free name)
	recPath     string
	logf        func(format string, args ...any)
	rotateAt    int64
	rotateBytes int64
	inflight    sync.WaitGroup
	mu          sync.Mutex
	turns       []trace.Turn
	bytes       int64
	requests    int

	traceMeta  trace.TraceMeta
	tj         *os.File      // trace journal, under mu
	tjw        *bufio.Writer // under mu
	tjErr      error
	tjReported bool
	payload    []byte
	frame      []byte
}

// maxNameTries bounds the "-k" suffixes tried for a free file name.
const maxNameTries = 100

// recorder creates the segment's files on first use (file creation and an
// fsync: kept off the request path). They take the first free name among
// base, base-2, base-3...: an earlier run's files in the directory (a run
// started in the same second, or journals a killed run left) are never
// replaced.
func (s *segment) recorder() (*record.Recorder, error) {
	s.open.Do(func() {
		for k := 1; k <= maxNameTries; k++ {
			base := s.base
			if k > 1 {
				base = fmt.Sprintf("%s-%d", s.base, k)
			}
			s.tracePath, s.recPath = base+".trace.parquet", base+".recording.parquet"
			err := s.openTraceJournal()
			if err == nil {
				opts := s.recOpts
				opts.NoReplace = true
				if s.rec, err = record.NewRecorder(s.recPath, s.meta, opts); err != nil {
					s.dropTraceJournal()
				}
			}
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				s.openErr = fmt.Errorf("opening segment %d: %w", s.n, err)
			} else if k > 1 {
				s.logf("capture: files named %s* already exist in %s (an earlier run's); segment %d is written as %s* instead",
					filepath.Base(s.base), filepath.Dir(s.base), s.n, filepath.Base(base))
			}
			return
		}
		s.openErr = fmt.Errorf("opening segment %d: %s and %d suffixed names are all taken: %w", s.n, s.base, maxNameTries-1, fs.ErrExist)
	})
	return s.rec, s.openErr
}

// openTraceJournal reserves the segment's names and starts the crash-safe
// copy of its trace. The journal is created exclusively, after checking
// that no other file of the pair exists: it is the reservation, so two
// processes writing into one directory never share a name. An error
// wrapping fs.ErrExist means the name is taken.
func (s *segment) openTraceJournal() error {
	path := record.JournalPath(s.tracePath)
	for _, p := range []string{s.tracePath, s.tracePath + partialSuffix, s.recPath, record.JournalPath(s.recPath), s.recPath + partialSuffix} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: %w", p, fs.ErrExist)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("creating trace journal: %w", err)
	}
	payload, err := trace.AppendJSONPayload(nil, trace.FrameTraceMeta, s.traceMeta)
	if err == nil {
		_, err = f.Write(trace.AppendJournalFrame([]byte(trace.TraceJournalMagic), payload))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("writing trace journal %s: %w", path, err)
	}
	s.mu.Lock()
	s.tj, s.tjw = f, bufio.NewWriterSize(f, 1<<16)
	s.mu.Unlock()
	return nil
}

// dropTraceJournal undoes openTraceJournal (the recording's name was taken).
func (s *segment) dropTraceJournal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tj != nil {
		s.tj.Close()
		os.Remove(s.tj.Name())
		s.tj, s.tjw = nil, nil
	}
}

// partialSuffix names a file being written until it is complete and renamed.
const partialSuffix = ".partial"

// addTurn keeps a finished turn and appends it to the trace journal.
func (s *segment) addTurn(t *trace.Turn, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, *t)
	s.bytes += bytes
	s.requests++
	if s.tjw == nil || s.tjErr != nil {
		return
	}
	payload, err := trace.AppendJSONPayload(s.payload[:0], trace.FrameTurn, t)
	if err == nil {
		s.payload = payload
		s.frame = trace.AppendJournalFrame(s.frame[:0], payload)
		_, err = s.tjw.Write(s.frame)
	}
	s.tjErr = err
}

// syncTrace makes the trace journal durable (called every SyncEvery). It
// returns a journal failure once; the trace is still written at close.
func (s *segment) syncTrace() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tjw == nil || s.tjReported {
		return nil
	}
	if s.tjErr == nil {
		if s.tjErr = s.tjw.Flush(); s.tjErr == nil {
			s.tjErr = s.tj.Sync()
		}
	}
	if s.tjErr != nil {
		s.tjReported = true
	}
	return s.tjErr
}

func (s *segment) due(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now >= s.rotateAt || s.bytes >= s.rotateBytes
}

// segmentFor returns the current segment (opening or rotating as needed)
// and counts the request in flight in it.
func (p *Proxy) segmentFor(now int64) (*segment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("proxy closed")
	}
	if p.seg != nil && p.seg.due(now) {
		p.rotateLocked()
	}
	if p.seg == nil {
		p.nseg++
		s := &segment{
			n: p.nseg, origin: now, logf: p.cfg.Logf,
			base:     filepath.Join(p.cfg.OutDir, fmt.Sprintf("capture-%s-%04d", p.stamp, p.nseg)),
			rotateAt: now + int64(p.cfg.RotateEvery), rotateBytes: p.cfg.RotateBytes,
		}
		meta := trace.RunMeta{
			TracekitVersion: trace.Version,
			StartWallNs:     p.wallStart + (now - p.runStart),
			StartMonoNs:     now,
			Targets:         []string{p.target},
			Host:            p.host,
			Command:         p.cfg.Command,
			Config: map[string]any{
				"mode": "capture", "upstream": p.target, "segment": s.n,
				"session_header": p.cfg.SessionHeader, "redact_content": p.cfg.RedactContent,
			},
			Trace: p.traceMeta(),
		}
		s.meta, s.recOpts = meta, record.RecorderOptions{Queue: p.cfg.Queue, SyncEvery: p.cfg.SyncEvery}
		s.traceMeta = *meta.Trace
		p.seg = s
	}
	p.seg.inflight.Add(1)
	return p.seg, nil
}

func (p *Proxy) traceMeta() *trace.TraceMeta {
	opts := map[string]string{"upstream": p.target}
	if p.cfg.RedactContent {
		opts["redacted"] = "true"
		opts["block_size"] = strconv.Itoa(RedactBlockSize)
	}
	return &trace.TraceMeta{
		TracekitVersion: trace.Version,
		Command:         p.cfg.Command,
		Tokenizer:       p.tok.Name(),
		Source:          "capture",
		CreatedAt:       clockWallRFC3339(p.wallStart),
		Options:         opts,
	}
}

// rotateLocked retires the current segment: a goroutine owned by
// p.closers waits for its requests and writes its files.
func (p *Proxy) rotateLocked() {
	s := p.seg
	if s == nil {
		return
	}
	p.seg = nil
	p.closers.Add(1)
	go func() {
		defer p.closers.Done()
		s.inflight.Wait()
		err := s.close()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.errs = append(p.errs, err)
			p.cfg.Logf("capture: %v", err)
			return
		}
		p.files = append(p.files, Segment{Trace: s.tracePath, Recording: s.recPath, Requests: s.requests})
	}()
}

// close finishes the recording and writes the trace (sorted) into a
// partial file renamed into place once complete; the trace journal, made
// durable first, is removed only then.
func (s *segment) close() error {
	rec, err := s.recorder()
	if err != nil {
		return err // nothing was recorded in this segment
	}
	recErr := rec.Close()
	if err := s.syncTrace(); err != nil {
		s.logf("capture: segment %d: trace journal: %v", s.n, err)
	}
	tmp := s.tracePath + partialSuffix
	if err := trace.WriteTrace(tmp, s.traceMeta, s.turns); err != nil {
		os.Remove(tmp)
		return errors.Join(fmt.Errorf("segment %d: writing the trace (its journal %s is kept: 'tracekit recover' it): %w", s.n, s.tj.Name(), err), recErr)
	}
	if err := record.RenameNoReplace(tmp, s.tracePath); err != nil {
		return errors.Join(fmt.Errorf("segment %d: moving the trace into place (it is complete at %s): %w", s.n, tmp, err), recErr)
	}
	trace.SyncDir(filepath.Dir(s.tracePath))
	s.tj.Close()
	if err := os.Remove(s.tj.Name()); err != nil {
		return errors.Join(fmt.Errorf("segment %d: %w", s.n, err), recErr)
	}
	if recErr != nil {
		return fmt.Errorf("segment %d: %w", s.n, recErr)
	}
	return nil
}

// account turns a finished exchange into a recording row and a trace turn.
// The conversation bookkeeping is done here, before the handler returns
// (a client sends its next turn only after this response ended); token
// counting, the slow part, runs on a goroutine the segment waits for.
func (p *Proxy) account(seg *segment, ex *exchange, call *llmCall, r *http.Request) {
	if call == nil { // not a JSON completion request after all: forwarded, not recorded
		p.streams.Put(ex.stream)
		seg.inflight.Done()
		return
	}
	res := &ex.res
	rec := &trace.Record{
		Target:     p.target,
		IntendedNs: ex.arrival - seg.origin, SlotNs: ex.arrival - seg.origin,
		SentNs: res.sentNs - seg.origin, DoneNs: res.doneNs - seg.origin,
		Status: int32(res.status), MaxTokens: call.maxTokens,
	}
	if res.headersNs != 0 {
		rec.HeadersNs = res.headersNs - seg.origin
	}
	// A non-streaming exchange (the request asked for one JSON body, or the
	// upstream answered a stream request with one) has a single event: the
	// body completely read, carrying every completion token.
	rec.NonStreaming = !call.stream || (res.sendErr == nil && res.status/100 == 2 && !res.sse)
	answer := ex.stream.Text()
	turn := trace.Turn{ArrivalOffsetNs: ex.arrival - seg.origin, Model: call.model, NonStreaming: !call.stream}
	if !p.cfg.RedactContent {
		turn.ReferenceAnswer = answer
	}

	p.mu.Lock()
	p.reqSeq++
	rec.RequestID = r.Header.Get("X-Request-Id")
	if rec.RequestID == "" {
		rec.RequestID = fmt.Sprintf("cap-%d-%d", seg.n, p.reqSeq)
	}
	var c *conv
	histLen := 0
	if p.cfg.SessionHeader != "" && r.Header.Get(p.cfg.SessionHeader) != "" {
		c = p.convs.session(r.Header.Get(p.cfg.SessionHeader))
		if c.seq > 0 && c.seg == seg {
			histLen = -1 // the client's history layout is unknown: keep the new tail below
		}
	} else if call.chat {
		c, histLen = p.convs.match(call.messages)
	}
	if c == nil {
		p.convSeq++
		c = &conv{id: fmt.Sprintf("conv-%d", p.convSeq)}
	}
	if c.seg != seg || c.seq == 0 { // first turn here: the whole history is this turn's messages
		c.seg, c.segBase, c.start = seg, c.seq, ex.arrival
		histLen = 0
		turn.ThinkTimeNs = 0
	} else {
		turn.ThinkTimeNs = max(0, ex.arrival-c.prevDone)
	}
	if histLen < 0 { // session header: new messages are those after the last assistant message
		histLen = 0
		for i, m := range call.messages {
			if m.Role == "assistant" {
				histLen = i + 1
			}
		}
	}
	seq := c.seq
	c.seq++
	c.prevDone = res.doneNs
	turn.ConversationID, turn.Turn = c.id, seq-c.segBase
	turn.StartOffsetNs = c.start - seg.origin
	if call.chat {
		p.convs.register(c, seq, call.messages, answer)
	}
	p.mu.Unlock()

	rec.ConversationID, rec.Turn = turn.ConversationID, turn.Turn
	turn.Messages = append([]trace.Message(nil), call.messages[histLen:]...)

	// The rest runs off the request path; the segment waits for it.
	go func() {
		defer seg.inflight.Done()
		defer p.streams.Put(ex.stream)
		ex.stream.Fill(rec)
		for i := range rec.EventNs {
			rec.EventNs[i] -= seg.origin
		}
		switch {
		case res.sendErr != nil && res.clientGone:
			rec.ErrorKind, rec.ErrorMessage = trace.ErrCanceled, "the client went away before the upstream answered"
		case res.sendErr != nil:
			rec.ErrorKind, rec.ErrorMessage = trace.ErrConnect, "upstream: "+res.sendErr.Error()
		case res.status/100 != 2:
			msg := rec.ErrorMessage
			rec.ErrorKind, rec.ErrorMessage = trace.ErrHTTPStatus, fmt.Sprintf("HTTP %d", res.status)
			if msg != "" {
				rec.ErrorMessage += ": " + msg
			}
		case ex.stream.Done():
			// Complete: a client that stops reading after [DONE] (the
			// OpenAI SDK does) cuts the body's last bytes, nothing more.
		case res.clientGone:
			rec.ErrorKind, rec.ErrorMessage = trace.ErrCanceled, fmt.Sprintf("the client went away after %d events", len(rec.EventNs))
		case res.readErr != nil:
			rec.ErrorKind = trace.ErrStreamTruncated
			rec.ErrorMessage = fmt.Sprintf("the upstream broke off after %d events: %v", len(rec.EventNs), res.readErr)
		}
		var all int32
		for i := range call.messages {
			m := &call.messages[i]
			m.Tokens = int32(p.tok.Count(m.Content))
			all += m.Tokens
		}
		rec.InputTokens = all
		var bytes int64
		for i := range turn.Messages {
			m := &turn.Messages[i]
			m.Tokens = call.messages[histLen+i].Tokens
			turn.InputTokens += m.Tokens
			bytes += int64(len(m.Content))
			if p.cfg.RedactContent {
				m.Content = ""
			}
		}
		turn.OutputTokens = outputTokens(rec, call, answer, p.tok.Count)
		if p.cfg.RedactContent {
			turn.PrefixHashes = p.prefixHashes(call.messages)
		}
		bytes += int64(len(turn.ReferenceAnswer))
		w, err := seg.recorder()
		if err != nil {
			p.cfg.Logf("capture: %v (request %s not recorded)", err, rec.RequestID)
			return
		}
		w.Submit(rec)
		seg.addTurn(&turn, bytes+64)
	}()
}

// RedactBlockSize is the tokens per PrefixHashes block of a redacted
// capture (vLLM's default KV block size), also in TraceMeta.Options.
const RedactBlockSize = 16

// prefixHashes describes a redacted prompt's prefix reuse: the prompt (all
// messages, roles included) is tokenized and cut into RedactBlockSize-token
// blocks; block i hashes the whole prefix up to its end, so two prompts
// share hash i exactly when they share those tokens. The last block may be
// partial.
func (p *Proxy) prefixHashes(msgs []trace.Message) []int64 {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	ids := p.tok.Encode(b.String())
	out := make([]int64, 0, (len(ids)+RedactBlockSize-1)/RedactBlockSize)
	h := uint64(14695981039346656037) // FNV-1a, chained over the blocks
	for i, id := range ids {
		for v := uint64(id); ; v >>= 8 {
			h = (h ^ (v & 0xff)) * 1099511628211
			if v < 0x100 {
				break
			}
		}
		if (i+1)%RedactBlockSize == 0 || i == len(ids)-1 {
			out = append(out, int64(h&(1<<63-1)))
		}
	}
	return out
}

// outputTokens is the output length replay should ask for: the server's
// count, else the answer counted, else the request's max_tokens.
func outputTokens(rec *trace.Record, call *llmCall, answer string, count func(string) int) int32 {
	switch {
	case rec.CompletionTokens > 0:
		return rec.CompletionTokens
	case answer != "":
		return int32(count(answer))
	case call.maxTokens > 0:
		return call.maxTokens
	}
	return 1
}

// clockWallRFC3339 formats a unix-ns wall time.
func clockWallRFC3339(ns int64) string {
	return timeFromUnixNano(ns).UTC().Format("2006-01-02T15:04:05Z07:00")
}
