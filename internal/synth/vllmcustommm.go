package synth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// VLLMDefaultCustomOutputLen is vllm bench serve's --custom-output-len
// default: the max_tokens of every request of its custom datasets.
const VLLMDefaultCustomOutputLen = 256

// VLLMCustomMMOptions configure a VLLMCustomMM source.
type VLLMCustomMMOptions struct {
	Path string
	// ImageDir is where relative image paths are read from; "" is the
	// dataset's directory.
	ImageDir  string
	Tokenizer tokenizer.Tokenizer
	// Count is the requests (--num-prompts); 0 takes every record.
	Count int
	Seed  int64
	// OutputLen is every request's max_tokens (--custom-output-len); 0
	// means VLLMDefaultCustomOutputLen.
	OutputLen    int
	NoShuffle    bool // --disable-shuffle: records in file order
	NoOversample bool // --no-oversample: fewer requests when the file has fewer records
	// MaxBytes refuses a dataset file larger than it; 0 means no limit.
	MaxBytes int64
	Progress func(done, total int64)
}

// VLLMCustomMM reads vllm bench serve's custom multimodal dataset
// (--dataset-name custom_mm, which newer vLLM also calls custom_image): JSON
// Lines of {"prompt": "...", "image_files": ["path", ...]}, one
// single-turn request each. As vLLM does, only the first image of a record
// is sent (the others are counted, extra_images_ignored), the records are
// shuffled with the seed unless NoShuffle (tracekit's shuffle: another
// order than Python's), Count are taken and, unless NoOversample, records
// drawn again until there are Count; every request asks for OutputLen
// tokens. The images are local files (relative to ImageDir or the
// dataset's directory; a file:// URL is read as its path; an http URL is
// refused: tracekit downloads nothing), read, decoded and stored once per
// distinct content in the trace's media file (MediaImporter).
type VLLMCustomMM struct {
	Opts   VLLMCustomMMOptions
	w      *trace.MediaWriter
	report map[string]int
}

var (
	_ MediaImporter = (*VLLMCustomMM)(nil)
	_ Reporter      = (*VLLMCustomMM)(nil)
)

// NewVLLMCustomMM checks o and returns the source.
func NewVLLMCustomMM(o VLLMCustomMMOptions) (*VLLMCustomMM, error) {
	const st = "VLLMCustomMMOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file")
	case o.Tokenizer == nil:
		return nil, fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Count < 0:
		return nil, fieldErr(st, "Count", "%d is negative", o.Count)
	case o.OutputLen < 0:
		return nil, fieldErr(st, "OutputLen", "%d is negative", o.OutputLen)
	}
	if o.OutputLen == 0 {
		o.OutputLen = VLLMDefaultCustomOutputLen
	}
	return &VLLMCustomMM{Opts: o}, nil
}

func (s *VLLMCustomMM) Name() string { return "vllm-custom-mm" }

// UseMediaWriter implements MediaImporter.
func (s *VLLMCustomMM) UseMediaWriter(w *trace.MediaWriter) { s.w = w }

// Report counts records read, requests made and images stored.
func (s *VLLMCustomMM) Report() map[string]string { return reportStrings(s.report) }

// customMMRecord is one line of the dataset.
type customMMRecord struct {
	Prompt     *string         `json:"prompt"`
	ImageFiles json.RawMessage `json:"image_files"`
}

type customMMRequest struct {
	index  int
	prompt string
	image  string
}

// Conversations implements Source.
func (s *VLLMCustomMM) Conversations(ctx context.Context) ([]Conversation, error) {
	o := s.Opts
	if s.w == nil {
		return nil, fmt.Errorf("vllm-custom-mm source: %w", ErrNoMediaWriter)
	}
	s.report = map[string]int{}
	f, err := OpenInput(o.Path, o.Progress)
	if err != nil {
		return nil, fmt.Errorf("opening the custom multimodal dataset: %w", err)
	}
	defer f.Close()
	if err := checkSize("VLLMCustomMMOptions", float64(f.Size), o.MaxBytes, "a trace of "+o.Path); err != nil {
		return nil, err
	}
	var reqs []customMMRequest
	dec := json.NewDecoder(f)
	for i := 0; ; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var rec customMMRecord
		if err := dec.Decode(&rec); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: record %d (byte %d): not a JSON object of a prompt and its image_files: %w", o.Path, i, dec.InputOffset(), err)
		}
		s.report["records"]++
		if rec.Prompt == nil {
			return nil, fmt.Errorf("%s: record %d has no \"prompt\" (vLLM's custom dataset requires one)", o.Path, i)
		}
		paths, err := imagePaths(rec.ImageFiles)
		if err != nil || len(paths) == 0 {
			if err == nil {
				err = errors.New("no image")
			}
			return nil, fmt.Errorf("%s: record %d: \"image_files\": %v (vLLM's custom_mm sends the first image of each record)", o.Path, i, err)
		}
		s.report["extra_images_ignored"] += len(paths) - 1
		reqs = append(reqs, customMMRequest{index: i, prompt: *rec.Prompt, image: paths[0]})
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: %w: no records", o.Path, ErrNoConversations)
	}
	r := rand.New(rand.NewPCG(uint64(o.Seed), 0x6d6d))
	if !o.NoShuffle {
		r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	}
	if o.Count > 0 && o.Count < len(reqs) {
		reqs = reqs[:o.Count]
	}
	n := len(reqs)
	if !o.NoOversample {
		for len(reqs) < o.Count {
			reqs = append(reqs, reqs[r.IntN(n)])
		}
		s.report["oversampled"] = len(reqs) - n
	}
	images := newImageFiles(o.Path, o.ImageDir, s.w)
	turns := make([]trace.Turn, len(reqs))
	for i, q := range reqs {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m, err := images.load(fmt.Sprintf("record %d", q.index), q.image)
		if err != nil {
			return nil, err
		}
		in := int32(o.Tokenizer.Count(q.prompt))
		turns[i] = trace.Turn{
			Messages:     []trace.Message{{Role: "user", Content: q.prompt, Tokens: in, Media: []trace.Media{m}}},
			InputTokens:  in,
			OutputTokens: int32(o.OutputLen),
		}
	}
	s.report["requests"] = len(turns)
	s.report["image_files"] = len(images.seen)
	return singleTurns("custom_mm", turns), nil
}

// reportStrings is a report's counts as text.
func reportStrings(r map[string]int) map[string]string {
	out := make(map[string]string, len(r))
	for k, v := range r {
		out[k] = strconv.Itoa(v)
	}
	return out
}
