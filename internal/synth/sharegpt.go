package synth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// ShareGPT reads conversations from a ShareGPT file: a JSON array of
// records or JSON Lines, told apart by the first non-blank byte. A record
// is {"id", "conversations": [{"from", "value"}]}; "messages" with
// "role"/"content" (the OpenAI-style conversion) is read too.
//
// Real files are messy; each quirk is handled one way and counted in the
// report:
//   - roles human/user are the user; gpt/assistant/chatgpt/bing/bard the
//     assistant; system the system; any other role is dropped
//     (unknown_role);
//   - a message whose value is empty or blank is dropped (empty_message);
//   - system messages before the first user message become turn 0's system
//     prompt; later ones are dropped (late_system);
//   - assistant messages before the first user message are dropped
//     (leading_assistant);
//   - consecutive messages of the same role are merged, joined by a blank
//     line (merged_messages);
//   - a final user message without an answer is dropped (trailing_user);
//   - a record with no user+answer pair left is dropped (no_turns), as is
//     a record without a message list (no_messages);
//   - bytes that are not UTF-8 are replaced by U+FFFD, as JSON decoding
//     does, and counted (invalid_utf8_bytes).
//
// Each remaining user message and its answer form a turn: the answer is
// the reference answer and its token count is max_tokens. Conversations
// are then filtered by user turns (TurnsMin..TurnsMax) and by every turn's
// input and answer tokens, and Count of them are sampled with Seed (all
// when Count is 0), keeping file order.
type ShareGPT struct {
	Opts ShareGPTOptions

	report  map[string]int
	skipped int64 // bytes before the JSON array, for error positions

	// images, when set (LLaVA), reads each record's "image" field: the
	// files are loaded for the conversations kept (llava.go).
	images   *imageFiles
	pending  map[string]sharegptImages // by conversation id
	imageErr error                     // the first bad "image" field
}

// ShareGPTOptions configure a ShareGPT source.
type ShareGPTOptions struct {
	Path      string
	Tokenizer tokenizer.Tokenizer
	Count     int // conversations to sample; 0 keeps all
	Seed      int64
	// Filters; a zero maximum means no limit.
	TurnsMin, TurnsMax   int
	InputMin, InputMax   int  // tokens of each turn's new messages
	OutputMin, OutputMax int  // tokens of each reference answer
	ThinkTime            Dist // seconds before turns k > 0; nil means 0
	// MaxBytes refuses an input file larger than it (the trace holds the
	// file's text); 0 means no limit.
	MaxBytes int64
	Progress func(done, total int64)
}

var (
	_ Source   = (*ShareGPT)(nil)
	_ Reporter = (*ShareGPT)(nil)
)

// NewShareGPT checks o and returns the source.
func NewShareGPT(o ShareGPTOptions) (*ShareGPT, error) {
	s := &ShareGPT{Opts: o}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *ShareGPT) validate() error {
	o := s.Opts
	const st = "ShareGPTOptions"
	switch {
	case o.Path == "":
		return fieldErr(st, "Path", "no input file")
	case o.Tokenizer == nil:
		return fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Count < 0:
		return fieldErr(st, "Count", "%d is negative", o.Count)
	}
	for _, r := range []struct {
		lo, hi   string
		min, max int
	}{{"TurnsMin", "TurnsMax", o.TurnsMin, o.TurnsMax}, {"InputMin", "InputMax", o.InputMin, o.InputMax}, {"OutputMin", "OutputMax", o.OutputMin, o.OutputMax}} {
		if r.min < 0 {
			return fieldErr(st, r.lo, "%d is negative", r.min)
		}
		if r.max < 0 || (r.max > 0 && r.max < r.min) {
			return fieldErr(st, r.hi, "%d is below the minimum %d", r.max, r.min)
		}
	}
	return nil
}

func (s *ShareGPT) Name() string { return "sharegpt" }

// Report counts records read, kept, and dropped by reason.
func (s *ShareGPT) Report() map[string]string {
	out := make(map[string]string, len(s.report))
	for k, v := range s.report {
		out[k] = strconv.Itoa(v)
	}
	return out
}

// sharegptRecord is one record as written in the file.
type sharegptRecord struct {
	ID            json.RawMessage   `json:"id"`
	Conversations []sharegptMessage `json:"conversations"`
	Messages      []sharegptMessage `json:"messages"`
	Image         json.RawMessage   `json:"image"` // LLaVA: a path or a list of paths
}

type sharegptMessage struct {
	From    string `json:"from"`
	Value   string `json:"value"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// sharegptTurn is a user message (with the system prompt on turn 0) and
// its answer, before token counting.
type sharegptTurn struct{ system, user, answer string }

type sharegptConv struct {
	id     string
	turns  []sharegptTurn
	images sharegptImages
}

func (s *ShareGPT) Conversations(ctx context.Context) ([]Conversation, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("sharegpt source: %w", err)
	}
	s.report = map[string]int{}
	var convs []sharegptConv
	ids := map[string]bool{}
	err := s.eachRecord(ctx, func(index int, rec *sharegptRecord) {
		s.report["records"]++
		c, ok := s.clean(rec)
		if !ok {
			return
		}
		c.id = s.recordID(rec.ID, index, ids)
		if s.images != nil {
			if err := s.placeImages(&c, index, rec.Image); err != nil && s.imageErr == nil {
				s.imageErr = err
			}
		}
		if n := len(c.turns); n < s.Opts.TurnsMin || (s.Opts.TurnsMax > 0 && n > s.Opts.TurnsMax) {
			s.report["filtered_turns"]++
			return
		}
		convs = append(convs, c)
	})
	if err == nil {
		err = s.imageErr
	}
	if err != nil {
		return nil, err
	}
	if s.Opts.InputMin == 0 && s.Opts.InputMax == 0 && s.Opts.OutputMin == 0 && s.Opts.OutputMax == 0 {
		// No token filter: build keeps every conversation, so sampling
		// first picks the same ones and only they are token-counted.
		convs = sample(convs, s.Opts.Count, s.Opts.Seed)
	}
	out := make([]Conversation, 0, len(convs))
	for _, c := range convs {
		conv, ok := s.build(c)
		if !ok {
			s.report["filtered_tokens"]++
			continue
		}
		if len(c.images.paths) > 0 {
			s.pending[c.id] = c.images
		}
		out = append(out, conv)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w after cleaning and filtering (%s)", s.Opts.Path, ErrNoConversations, s.summary())
	}
	out = sample(out, s.Opts.Count, s.Opts.Seed)
	if err := s.loadImages(out); err != nil {
		return nil, err
	}
	s.report["kept"] = len(out)
	s.applyThinkTime(out)
	return out, nil
}

func (s *ShareGPT) summary() string {
	keys := make([]string, 0, len(s.report))
	for k := range s.report {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, s.report[k])
	}
	return strings.Join(parts, ", ")
}

// recordID is the record's id when it is a unique non-empty string or
// number, else "sharegpt-<index>".
func (s *ShareGPT) recordID(raw json.RawMessage, index int, seen map[string]bool) string {
	id := ""
	var str string
	if json.Unmarshal(raw, &str) == nil {
		id = str
	} else if n := json.Number(""); json.Unmarshal(raw, &n) == nil {
		id = n.String()
	}
	if id == "" {
		s.report["missing_id"]++
		id = "sharegpt-" + strconv.Itoa(index)
	}
	if seen[id] {
		s.report["duplicate_id"]++
		id += "#" + strconv.Itoa(index)
	}
	seen[id] = true
	return id
}

// roleOf maps a ShareGPT speaker to a chat role ("" for unknown).
func roleOf(from string) string {
	switch strings.ToLower(strings.TrimSpace(from)) {
	case "human", "user":
		return "user"
	case "gpt", "assistant", "chatgpt", "bing", "bard", "model":
		return "assistant"
	case "system":
		return "system"
	}
	return ""
}

// clean applies the quirk rules of ShareGPT's doc to one record.
func (s *ShareGPT) clean(rec *sharegptRecord) (sharegptConv, bool) {
	msgs := rec.Conversations
	if len(msgs) == 0 {
		msgs = rec.Messages
	}
	if len(msgs) == 0 {
		s.report["no_messages"]++
		return sharegptConv{}, false
	}
	type msg struct{ role, text string }
	var seq []msg
	var system []string
	seenUser := false
	for _, m := range msgs {
		from, text := m.From, m.Value
		if from == "" {
			from, text = m.Role, m.Content
		}
		role := roleOf(from)
		switch {
		case role == "":
			s.report["unknown_role"]++
			continue
		case strings.TrimSpace(text) == "":
			s.report["empty_message"]++
			continue
		case role == "system" && !seenUser:
			system = append(system, text)
			continue
		case role == "system":
			s.report["late_system"]++
			continue
		case role == "assistant" && !seenUser:
			s.report["leading_assistant"]++
			continue
		}
		seenUser = seenUser || role == "user"
		if n := len(seq); n > 0 && seq[n-1].role == role {
			seq[n-1].text += "\n\n" + text
			s.report["merged_messages"]++
			continue
		}
		seq = append(seq, msg{role, text})
	}
	if len(seq)%2 == 1 {
		seq = seq[:len(seq)-1]
		s.report["trailing_user"]++
	}
	if len(seq) == 0 {
		s.report["no_turns"]++
		return sharegptConv{}, false
	}
	c := sharegptConv{turns: make([]sharegptTurn, 0, len(seq)/2)}
	for i := 0; i < len(seq); i += 2 {
		c.turns = append(c.turns, sharegptTurn{user: seq[i].text, answer: seq[i+1].text})
	}
	c.turns[0].system = strings.Join(system, "\n\n")
	return c, true
}

// build counts tokens and applies the token filters.
func (s *ShareGPT) build(c sharegptConv) (Conversation, bool) {
	conv := make(Conversation, len(c.turns))
	for k, t := range c.turns {
		row := &conv[k]
		row.ConversationID = c.id
		row.Turn = int32(k)
		if t.system != "" {
			row.Messages = append(row.Messages, trace.Message{Role: "system", Content: t.system, Tokens: int32(s.Opts.Tokenizer.Count(t.system))})
		}
		row.Messages = append(row.Messages, trace.Message{Role: "user", Content: t.user, Tokens: int32(s.Opts.Tokenizer.Count(t.user))})
		for _, m := range row.Messages {
			row.InputTokens += m.Tokens
		}
		out := s.Opts.Tokenizer.Count(t.answer)
		if !within(int(row.InputTokens), s.Opts.InputMin, s.Opts.InputMax) || !within(out, s.Opts.OutputMin, s.Opts.OutputMax) {
			return nil, false
		}
		row.ReferenceAnswer = t.answer
		row.OutputTokens = int32(max(out, 1))
	}
	return conv, true
}

func within(v, lo, hi int) bool { return v >= lo && (hi == 0 || v <= hi) }

// sample keeps count of xs chosen with seed (all when count is 0 or
// covers them), in their order.
func sample[T any](xs []T, count int, seed int64) []T {
	if count <= 0 || count >= len(xs) {
		return xs
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x5a6e))
	idx := r.Perm(len(xs))[:count]
	sort.Ints(idx)
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = xs[j]
	}
	return out
}

func (s *ShareGPT) applyThinkTime(convs []Conversation) {
	if s.Opts.ThinkTime == nil {
		return
	}
	r := rand.New(rand.NewPCG(uint64(s.Opts.Seed), 0x7417))
	for _, c := range convs {
		for k := 1; k < len(c); k++ {
			c[k].ThinkTimeNs = int64(math.Round(max(s.Opts.ThinkTime.Sample(r), 0) * 1e9))
		}
	}
}

// eachRecord streams the file's records to fn with their 0-based index.
func (s *ShareGPT) eachRecord(ctx context.Context, fn func(int, *sharegptRecord)) error {
	f, err := OpenInput(s.Opts.Path, s.Opts.Progress)
	if err != nil {
		return fmt.Errorf("opening ShareGPT input: %w", err)
	}
	defer f.Close()
	// A compressed file's size is a lower bound of its text.
	size := f.Size
	if err := checkSize("ShareGPTOptions", float64(size), s.Opts.MaxBytes, "a trace of "+s.Opts.Path); err != nil {
		return err
	}
	u := &utf8Counter{r: f}
	defer func() {
		if n := u.Invalid(); n > 0 {
			s.report[reportInvalidUTF8] = int(n)
		}
	}()
	br := bufio.NewReaderSize(u, 1<<20)
	first, skipped, err := firstNonSpace(br)
	s.skipped = skipped
	if err != nil {
		return fmt.Errorf("%s: empty file, want a ShareGPT JSON array or JSON Lines", s.Opts.Path)
	}
	if first == '[' {
		return s.eachArrayRecord(ctx, br, fn)
	}
	return s.eachLineRecord(ctx, br, fn)
}

// firstNonSpace peeks at the first byte that is not white space or a
// UTF-8 byte-order mark and says how many bytes came before it.
func firstNonSpace(br *bufio.Reader) (byte, int64, error) {
	for n := int64(0); ; n++ {
		b, err := br.ReadByte()
		if err != nil {
			return 0, n, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' && b != 0xEF && b != 0xBB && b != 0xBF {
			return b, n, br.UnreadByte()
		}
	}
}

func (s *ShareGPT) eachArrayRecord(ctx context.Context, br *bufio.Reader, fn func(int, *sharegptRecord)) error {
	dec := json.NewDecoder(br)
	if _, err := dec.Token(); err != nil { // '['
		return s.posError(dec.InputOffset(), -1, "reading the array", err)
	}
	for i := 0; dec.More(); i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		start := dec.InputOffset()
		var rec sharegptRecord
		if err := dec.Decode(&rec); err != nil {
			return s.posError(dec.InputOffset(), start, fmt.Sprintf("record %d", i), err)
		}
		fn(i, &rec)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return s.posError(dec.InputOffset(), -1, "end of the array", err)
	}
	return nil
}

func (s *ShareGPT) eachLineRecord(ctx context.Context, br *bufio.Reader, fn func(int, *sharegptRecord)) error {
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line, i := 0, 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var rec sharegptRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			f := jsonFaultOf(err)
			if !f.relative {
				f.err = fmt.Errorf("%w (want one ShareGPT record per line)", f.err)
			}
			off := f.off // Unmarshal counts both kinds of offset from the trimmed line
			if off >= 0 {
				off += int64(bytes.Index(raw, b))
			}
			return f.rowError(s.Opts.Path, raw, line, off, "")
		}
		fn(i, &rec)
		i++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s line %d: %w", s.Opts.Path, line+1, err)
	}
	return nil
}

// posError places a decoding error of the array in the file: off is the
// decoder's offset when it failed and start that of the record it was
// decoding (-1 outside a record), both counted after the bytes skipped
// before the array.
func (s *ShareGPT) posError(off, start int64, what string, err error) error {
	var de *DecompressError
	if errors.As(err, &de) {
		return fmt.Errorf("reading %s: %w", s.Opts.Path, err)
	}
	f := jsonFaultOf(err)
	switch {
	case f.relative && start >= 0:
		off = start + f.off // approximately: start precedes the record's separator
		what = ""           // the field says where
	case f.off >= 0:
		off = f.off // syntax errors count from the start of the stream
	}
	b, rerr := ReadInput(s.Opts.Path)
	if rerr != nil {
		b = nil
	}
	return f.rowError(s.Opts.Path, b, 1, off+s.skipped, what)
}

// countingReader reports bytes read for a progress line.
type countingReader struct {
	r        io.Reader
	n, total int64
	progress func(done, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil {
		c.progress(c.n, c.total)
	}
	return n, err
}

// ParseRange reads a filter "MIN-MAX", "MIN-" (no maximum) or "N"
// (exactly N); a distribution spec is accepted for its bounds. The maximum
// comes back 0 for "no maximum", so a range whose maximum is 0 is refused.
func ParseRange(spec string) (int, int, error) {
	spec = strings.TrimSpace(spec)
	if a, ok := strings.CutSuffix(spec, "-"); ok {
		lo, err := strconv.Atoi(a)
		if err != nil || lo < 0 {
			return 0, 0, fmt.Errorf("%q: want MIN-MAX, MIN- or N", spec)
		}
		return lo, 0, nil
	}
	d, err := ParseDist(spec, Count)
	if err != nil {
		return 0, 0, err
	}
	var lo, hi int
	switch d := d.(type) {
	case Constant:
		lo, hi = int(d.V), int(d.V)
	case Uniform:
		lo, hi = int(math.Ceil(d.Min)), int(d.Max)
	case Bounded:
		return int(math.Ceil(d.Min)), int(d.Max), nil
	default:
		return 0, 0, fmt.Errorf("%q: a filter is a range MIN-MAX, not a distribution", spec)
	}
	if hi < 1 || hi < lo {
		return 0, 0, fmt.Errorf("%q: nothing is in this range (a maximum of at least 1 and the minimum, or MIN- for none)", spec)
	}
	return lo, hi, nil
}
