package trace

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// The journal is the crash-safe copy of a recording: an append-only file
// that the Recorder fsyncs every SyncEvery, so a SIGKILL loses at most that
// much. It starts with JournalMagic, then holds frames:
//
//	uint32 LE  payload length
//	uint32 LE  CRC-32C of the payload
//	payload    kind byte ('M' run meta as JSON, 'R' one record) + body
//
// A frame cut short or failing its CRC ends the journal: a crash can only
// tear the tail.
const JournalMagic = "tracekit.journal.v8\n"

// journalMagicV7 is the journal of a build before Record.AudioMs: its
// record payloads end after AudioTokens. Recover still reads it.
const journalMagicV7 = "tracekit.journal.v7\n"

// journalMagicV6 is the journal of a build before Record's media columns
// by kind (ImageItems ... AudioTokens): its record payloads end after
// Model. Recover still reads it.
const journalMagicV6 = "tracekit.journal.v6\n"

// journalMagicV5 is the journal of a build before Record's media fields
// (WriteStartNs, RequestBytes, MediaItems, MediaBytes) and Model: its
// record payloads end after Items. Recover still reads it.
const journalMagicV5 = "tracekit.journal.v5\n"

// journalMagicV4 is the journal of a build before Record.Endpoint,
// ReasoningTokens, FirstAnswerEvent and Items: its record payloads end
// after After. Recover still reads it.
const journalMagicV4 = "tracekit.journal.v4\n"

// journalMagicV3 is the journal of a build before Record.After: its record
// payloads end after ToolCallMismatch. Recover still reads it.
const journalMagicV3 = "tracekit.journal.v3\n"

// journalMagicV2 is the journal of a build before Record's graph fields
// (Parents, ToolCalls, ToolCallMismatch): its record payloads end after
// the event lists. Recover still reads it.
const journalMagicV2 = "tracekit.journal.v2\n"

// journalMagicV1 is the journal of a build before Record.NonStreaming: its
// record payloads end after TokensExact. Recover still reads it.
const journalMagicV1 = "tracekit.journal.v1\n"

const (
	frameMeta   = 'M'
	frameRecord = 'R'
	// maxFrame bounds a frame so a corrupt length cannot make a reader
	// allocate gigabytes; a media frame holds one item whole.
	maxFrame = MaxMediaItemBytes + 1<<20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrNotJournal is wrapped when a file given to Recover is not a journal.
var ErrNotJournal = errors.New("not a tracekit journal")

// AppendJournalFrame appends one framed payload to dst; payload must start with
// its kind byte.
func AppendJournalFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

func AppendRunMetaPayload(dst []byte, meta RunMeta) ([]byte, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return dst, fmt.Errorf("encoding run meta for the journal: %w", err)
	}
	return append(append(dst, frameMeta), b...), nil
}

// AppendRecordPayload encodes rec compactly: varints, length-prefixed
// strings, event times as deltas in nanoseconds (a recording recovered
// from the journal is written by RecordWriter, which keeps them to the
// microsecond).
func AppendRecordPayload(dst []byte, r *Record) []byte {
	dst = append(dst, frameRecord)
	for _, s := range [...]string{r.RequestID, r.ConversationID, r.Target, string(r.ErrorKind), r.ErrorMessage} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	for _, v := range [...]int64{
		int64(r.Turn), int64(r.Shard), int64(r.Attempt), b2i(r.Warmup),
		r.IntendedNs, r.SlotNs, r.SentNs, r.HeadersNs, r.DoneNs,
		int64(r.Status), int64(r.InputTokens), int64(r.MaxTokens),
		int64(r.PromptTokens), int64(r.CompletionTokens), int64(r.CachedTokens), b2i(r.TokensExact), b2i(r.NonStreaming),
	} {
		dst = binary.AppendVarint(dst, v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.EventNs)))
	var prev int64
	for _, t := range r.EventNs {
		dst = binary.AppendVarint(dst, t-prev)
		prev = t
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.EventTokens)))
	for _, n := range r.EventTokens {
		dst = binary.AppendVarint(dst, int64(n))
	}
	dst = appendInt32s(dst, r.Parents)
	dst = binary.AppendVarint(dst, int64(r.ToolCalls))
	dst = binary.AppendVarint(dst, b2i(r.ToolCallMismatch))
	dst = appendInt32s(dst, r.After)
	dst = binary.AppendUvarint(dst, uint64(len(r.Endpoint)))
	dst = append(dst, r.Endpoint...)
	for _, v := range [...]int32{r.ReasoningTokens, r.FirstAnswerEvent, r.Items} {
		dst = binary.AppendVarint(dst, int64(v))
	}
	for _, v := range [...]int64{r.WriteStartNs, r.RequestBytes, int64(r.MediaItems), r.MediaBytes} {
		dst = binary.AppendVarint(dst, v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Model)))
	dst = append(dst, r.Model...)
	for _, v := range [...]int64{int64(r.ImageItems), r.ImageBytes, int64(r.VideoItems), r.VideoBytes, int64(r.AudioItems), r.AudioBytes,
		int64(r.ImageTokens), int64(r.VideoTokens), int64(r.AudioTokens), r.AudioMs} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// appendInt32s appends a length-prefixed list of varints (the decoder's
// int32s reads it).
func appendInt32s(dst []byte, v []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, x := range v {
		dst = binary.AppendVarint(dst, int64(x))
	}
	return dst
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// decoder reads the body of a record payload.
type decoder struct {
	b   []byte
	err error
}

var errShortPayload = errors.New("record payload ends early")

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShortPayload
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int32s reads a list appendInt32s wrote; nil when it is empty.
func (d *decoder) int32s() ([]int32, error) {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		return nil, errShortPayload
	}
	if n == 0 {
		return nil, nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(d.varint())
	}
	return v, nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortPayload
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errShortPayload
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Journal versions decodeRecord reads: the number in the magic line.
const (
	journalV1 = 1 // before Record.NonStreaming
	journalV2 = 2 // before Record.Parents, ToolCalls, ToolCallMismatch
	journalV3 = 3 // before Record.After
	journalV4 = 4 // before Record.Endpoint, ReasoningTokens, FirstAnswerEvent, Items
	journalV5 = 5 // before Record.WriteStartNs, RequestBytes, MediaItems, MediaBytes, Model
	journalV6 = 6 // before Record's media columns by kind (ImageItems ... AudioTokens)
	journalV7 = 7 // before Record.AudioMs
	journalV8 = 8
)

func decodeRecord(body []byte, r *Record, ver int) error {
	d := decoder{b: body}
	r.RequestID, r.ConversationID, r.Target, r.ErrorKind, r.ErrorMessage = d.str(), d.str(), d.str(), ErrorKind(d.str()), d.str()
	r.Turn, r.Shard, r.Attempt, r.Warmup = int32(d.varint()), int32(d.varint()), int32(d.varint()), d.varint() != 0
	r.IntendedNs, r.SlotNs, r.SentNs, r.HeadersNs, r.DoneNs = d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
	r.Status, r.InputTokens, r.MaxTokens = int32(d.varint()), int32(d.varint()), int32(d.varint())
	r.PromptTokens, r.CompletionTokens, r.CachedTokens = int32(d.varint()), int32(d.varint()), int32(d.varint())
	r.TokensExact = d.varint() != 0
	if ver >= journalV2 {
		r.NonStreaming = d.varint() != 0
	}
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each value takes at least one byte
		return errShortPayload
	}
	r.EventNs = make([]int64, n)
	var t int64
	for i := range r.EventNs {
		t += d.varint()
		r.EventNs[i] = t
	}
	n = d.uvarint()
	if n > uint64(len(d.b)) {
		return errShortPayload
	}
	r.EventTokens = make([]int32, n)
	for i := range r.EventTokens {
		r.EventTokens[i] = int32(d.varint())
	}
	r.Parents, r.ToolCalls, r.ToolCallMismatch = nil, 0, false
	if ver >= journalV3 {
		var err error
		if r.Parents, err = d.int32s(); err != nil {
			return err
		}
		r.ToolCalls, r.ToolCallMismatch = int32(d.varint()), d.varint() != 0
	}
	r.After = nil
	if ver >= journalV4 {
		var err error
		if r.After, err = d.int32s(); err != nil {
			return err
		}
	}
	r.Endpoint, r.ReasoningTokens, r.FirstAnswerEvent, r.Items = "", 0, 0, 0
	if ver >= journalV5 {
		r.Endpoint = d.str()
		r.ReasoningTokens, r.FirstAnswerEvent, r.Items = int32(d.varint()), int32(d.varint()), int32(d.varint())
	}
	r.WriteStartNs, r.RequestBytes, r.MediaItems, r.MediaBytes, r.Model = 0, 0, 0, 0, ""
	if ver >= journalV6 {
		r.WriteStartNs, r.RequestBytes, r.MediaItems, r.MediaBytes = d.varint(), d.varint(), int32(d.varint()), d.varint()
		r.Model = d.str()
	}
	r.ImageItems, r.ImageBytes, r.VideoItems, r.VideoBytes, r.AudioItems, r.AudioBytes = 0, 0, 0, 0, 0, 0
	r.ImageTokens, r.VideoTokens, r.AudioTokens = 0, 0, 0
	if ver >= journalV7 {
		r.ImageItems, r.ImageBytes, r.VideoItems, r.VideoBytes = int32(d.varint()), d.varint(), int32(d.varint()), d.varint()
		r.AudioItems, r.AudioBytes = int32(d.varint()), d.varint()
		r.ImageTokens, r.VideoTokens, r.AudioTokens = int32(d.varint()), int32(d.varint()), int32(d.varint())
	}
	r.AudioMs = 0
	if ver >= journalV8 {
		r.AudioMs = d.varint()
	}
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%d unexpected bytes after the record", len(d.b))
	}
	return d.err
}

// JournalReader reads frames until the end or the first torn frame.
type JournalReader struct {
	r      *bufio.Reader
	name   string
	offset int64 // of the next frame
	buf    []byte
	ver    int // journalV1.. of the magic line
	Meta   RunMeta
	// Torn is set when the journal ended in a partial or corrupt frame,
	// which a crash leaves; TornOffset is where the valid part ends.
	Torn       bool
	TornOffset int64
}

// SniffJournal returns the magic line r starts with, if it is one of ours.
func SniffJournal(r *bufio.Reader) string {
	for _, m := range []string{JournalMagic, journalMagicV7, journalMagicV6, journalMagicV5, journalMagicV4, journalMagicV3, journalMagicV2, journalMagicV1, TraceJournalMagic} {
		if b, err := r.Peek(len(m)); err == nil && string(b) == m {
			return m
		}
	}
	return ""
}

func NewJournalReader(r io.Reader, name, magic string) (*JournalReader, error) {
	if magic != JournalMagic && magic != TraceJournalMagic {
		// SniffJournal's "" for a file not yet begun, or a caller's slip.
		return nil, fmt.Errorf("%s: %w (asked for magic %q: expected the recording's or the trace's)", name, ErrNotJournal, magic)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	got := SniffJournal(br)
	ver := journalV8
	if magic == JournalMagic {
		switch got {
		case journalMagicV7:
			ver = journalV7
		case journalMagicV6:
			ver = journalV6
		case journalMagicV5:
			ver = journalV5
		case journalMagicV4:
			ver = journalV4
		case journalMagicV1:
			ver = journalV1
		case journalMagicV2:
			ver = journalV2
		case journalMagicV3:
			ver = journalV3
		}
	}
	if got != magic && ver == journalV8 {
		// A run killed before its journal's first line was on disk leaves
		// the start of that line or nothing: a journal torn at byte 0.
		if b, _ := br.Peek(len(magic)); len(b) < len(magic) && strings.HasPrefix(magic, string(b)) {
			br.Discard(len(b))
			return &JournalReader{r: br, name: name, ver: ver, Torn: true}, nil
		}
		return nil, fmt.Errorf("%s: %w (expected it to start with %q)", name, ErrNotJournal, magic[:len(magic)-1])
	}
	br.Discard(len(got))
	return &JournalReader{r: br, name: name, offset: int64(len(got)), ver: ver}, nil
}

// frame returns the next intact frame's payload and offset; io.EOF at the
// end of the valid part. The payload is valid until the next call.
func (j *JournalReader) Frame() ([]byte, int64, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(j.r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, 0, io.EOF
		}
		return nil, 0, j.torn()
	}
	size, sum := binary.LittleEndian.Uint32(hdr[:4]), binary.LittleEndian.Uint32(hdr[4:])
	if size == 0 || size > maxFrame {
		return nil, 0, j.torn()
	}
	if cap(j.buf) < int(size) {
		j.buf = make([]byte, size)
	}
	p := j.buf[:size]
	if _, err := io.ReadFull(j.r, p); err != nil {
		return nil, 0, j.torn()
	}
	if crc32.Checksum(p, castagnoli) != sum {
		return nil, 0, j.torn()
	}
	at := j.offset
	j.offset += int64(len(hdr) + len(p))
	return p, at, nil
}

// next decodes the next record into rec; it returns io.EOF at the end of
// the valid part (meta frames are absorbed into Meta).
func (j *JournalReader) Next(rec *Record) error {
	for {
		p, at, err := j.Frame()
		if err != nil {
			return err
		}
		switch p[0] {
		case frameMeta:
			if err := json.Unmarshal(p[1:], &j.Meta); err != nil {
				return fmt.Errorf("%s: byte %d: run meta frame: %w", j.name, at, err)
			}
		case frameRecord:
			if err := decodeRecord(p[1:], rec, j.ver); err != nil {
				return fmt.Errorf("%s: byte %d: record frame: %w", j.name, at, err)
			}
			return nil
		default:
			return fmt.Errorf("%s: byte %d: unknown frame kind %q", j.name, at, p[0])
		}
	}
}

func (j *JournalReader) torn() error {
	j.Torn, j.TornOffset = true, j.offset
	return io.EOF
}

// The trace journal of a capture segment: the same framing, holding the
// trace meta ('T', JSON) and each turn as it finishes ('U', JSON), and each
// real media item's bytes the first time the segment stores its content
// ('D', before the turn that carries it: WriteMediaFrame). A trace's rows
// are sorted, so the file itself is written when the segment closes; after
// a crash Recover sorts the journal's turns into it and stores its items
// in the media file beside it.
const (
	TraceJournalMagic = "tracekit.trace-journal.v1\n"
	FrameTraceMeta    = 'T'
	FrameTurn         = 'U'
	FrameMedia        = 'D'
)

// WriteMediaFrame writes a media frame of item m (a real item: Hash set)
// with its bytes data to w: 'D', the uvarint length of m's JSON, the JSON,
// then data. It writes the frame's pieces as they are, so an item is not
// copied into a buffer; a frame torn by a crash fails its CRC, which ends
// the journal there.
func WriteMediaFrame(w io.Writer, m Media, data []byte) error {
	if err := checkItemSize(int64(len(data))); err != nil {
		return err
	}
	m.Data = ""
	meta, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding a media item for the journal: %w", err)
	}
	head := binary.AppendUvarint([]byte{FrameMedia}, uint64(len(meta)))
	head = append(head, meta...)
	sum := crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, data)
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(head)+len(data)))
	binary.LittleEndian.PutUint32(hdr[4:], sum)
	for _, b := range [][]byte{hdr[:], head, data} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// decodeMedia splits a media frame's body (after 'D').
func decodeMedia(body []byte) (Media, []byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return Media{}, nil, errors.New("media frame: its item's description is cut short")
	}
	var m Media
	if err := json.Unmarshal(body[k:k+int(n)], &m); err != nil {
		return Media{}, nil, fmt.Errorf("media frame: %w", err)
	}
	data := body[k+int(n):]
	if m.Hash == "" || MediaHash(data) != m.Hash || int64(len(data)) != m.Bytes {
		return Media{}, nil, fmt.Errorf("media frame: %d bytes that are not the item %s of %d bytes it names", len(data), m.Hash, m.Bytes)
	}
	return m, data, nil
}

func AppendJSONPayload(dst []byte, kind byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("encoding a journal entry: %w", err)
	}
	return append(append(dst, kind), b...), nil
}

// ReadTraceJournal returns the turns and meta of a trace journal, and
// hands each media item it holds to media (nil: skipped); data is valid
// until media returns.
func (j *JournalReader) ReadTraceJournal(media func(m Media, data []byte) error) ([]Turn, TraceMeta, error) {
	var turns []Turn
	var meta TraceMeta
	for {
		p, at, err := j.Frame()
		if err == io.EOF {
			return turns, meta, nil
		}
		if err != nil {
			return nil, meta, err
		}
		switch p[0] {
		case FrameTraceMeta:
			err = json.Unmarshal(p[1:], &meta)
		case FrameTurn:
			var t Turn
			if err = json.Unmarshal(p[1:], &t); err == nil {
				turns = append(turns, t)
			}
		case FrameMedia:
			var m Media
			var data []byte
			if m, data, err = decodeMedia(p[1:]); err == nil && media != nil {
				err = media(m, data)
			}
		default:
			err = fmt.Errorf("unknown frame kind %q", p[0])
		}
		if err != nil {
			return nil, meta, fmt.Errorf("%s: byte %d: %w", j.name, at, err)
		}
	}
}
