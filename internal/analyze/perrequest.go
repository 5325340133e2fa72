package analyze

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// RequestRow is one row of the per-request file: every derived metric of
// one analyzed request, latencies in milliseconds, times in nanoseconds from
// the aligned run start.
type RequestRow struct {
	RequestID       string  `parquet:"request_id"`
	ConversationID  string  `parquet:"conversation_id"`
	Turn            int32   `parquet:"turn"`
	Shard           int32   `parquet:"shard"`
	Attempt         int32   `parquet:"attempt"`
	Warmup          bool    `parquet:"warmup"`
	Target          string  `parquet:"target"`
	File            string  `parquet:"file"`
	Success         bool    `parquet:"success"`
	Status          int32   `parquet:"status"`
	ErrorKind       string  `parquet:"error_kind"`
	IntendedNs      int64   `parquet:"intended_ns"`
	SlotNs          int64   `parquet:"slot_ns"`
	SentNs          int64   `parquet:"sent_ns"`
	DoneNs          int64   `parquet:"done_ns"`
	Events          int32   `parquet:"events"`
	PromptTokens    int32   `parquet:"prompt_tokens"`
	OutputTokens    int32   `parquet:"output_tokens"`
	CachedTokens    int32   `parquet:"cached_tokens"`
	TTFTms          float64 `parquet:"ttft_ms"`
	TPOTms          float64 `parquet:"tpot_ms"`
	ITLMeanms       float64 `parquet:"itl_request_mean_ms"`
	ITLContentms    float64 `parquet:"itl_first_content_ms"`
	E2ELms          float64 `parquet:"e2el_ms"`
	QueueMs         float64 `parquet:"queue_ms"`
	SendDelayMs     float64 `parquet:"send_delay_ms"`
	CorrectedTTFTms float64 `parquet:"corrected_ttft_ms"`
	CorrectedE2ELms float64 `parquet:"corrected_e2el_ms"`
	NonStreaming    bool    `parquet:"non_streaming"` // sent with "stream": false: no TTFT, TPOT or ITL (0)
	Truncated       bool    `parquet:"truncated"`     // the stream ended without data: [DONE] (success says what the rule made of it)
	// Endpoint is the API the request was sent on (chat, completions,
	// responses, messages, embeddings, rerank, score).
	Endpoint string `parquet:"endpoint"`
	// TTFOms is the time to first output token (the first answer text or
	// tool call, after reasoning) from the start; 0 when the request
	// streamed no answer token (Answered false) or did not stream.
	TTFOms          float64 `parquet:"ttfo_ms"`
	Answered        bool    `parquet:"answered"`
	ReasoningTokens int32   `parquet:"reasoning_tokens"` // usage's reasoning tokens, -1 if not reported
	Items           int32   `parquet:"items"`            // embeddings or rerank/score results returned
	// The per-request figures (figures.go; 0 where a request has none):
	// time to second token, reasoning duration, reasoning tokens (usage,
	// else counted from the stream) and answer tokens, 1 / TPOT and
	// prompt tokens / TTFT in tok/s, and cached / prompt tokens (-1 when
	// the server did not report cached tokens).
	TTSTms            float64 `parquet:"time_to_second_token_ms"`
	ReasoningMs       float64 `parquet:"reasoning_duration_ms"`
	ReasoningCount    int32   `parquet:"reasoning_token_count"`
	AnswerCount       int32   `parquet:"answer_token_count"`
	OutputTPSPerUser  float64 `parquet:"output_token_throughput_per_user"`
	PrefillTPSPerUser float64 `parquet:"prefill_throughput_per_user"`
	CacheHitRate      float64 `parquet:"cache_hit_rate"`
}

func (s *Summary) row(q *Request) RequestRow {
	f := func(ns int64) float64 { return float64(ns) / 1e6 }
	return RequestRow{
		RequestID: q.RequestID, ConversationID: q.ConversationID, Turn: q.Turn, Shard: q.Shard,
		Attempt: q.Attempt, Warmup: q.Warmup, Target: q.Target, File: s.Files[q.File].Path,
		Success: q.Success, Status: q.Status, ErrorKind: q.ErrorKind,
		IntendedNs: q.IntendedNs, SlotNs: q.SlotNs, SentNs: q.SentNs, DoneNs: q.DoneNs,
		Events: q.Events, PromptTokens: q.PromptTokens, OutputTokens: q.OutputTokens, CachedTokens: q.CachedTokens,
		TTFTms: f(q.TTFTNs), TPOTms: q.TPOTNs / 1e6, ITLMeanms: q.ITLMeanNs / 1e6, ITLContentms: q.ITLContentNs / 1e6, E2ELms: f(q.E2ELNs),
		QueueMs: f(q.QueueNs), SendDelayMs: f(q.SendDelayNs),
		CorrectedTTFTms: f(q.CorrectedTTFTNs), CorrectedE2ELms: f(q.CorrectedE2ELNs), NonStreaming: q.NonStreaming,
		Truncated: q.Truncated, Endpoint: q.Endpoint, TTFOms: f(q.TTFONs), Answered: q.Answered,
		ReasoningTokens: q.ReasoningTokens, Items: q.Items,
		TTSTms: f(q.TTSTNs), ReasoningMs: f(q.ReasoningNs), ReasoningCount: q.Reasoning, AnswerCount: q.Answer,
		OutputTPSPerUser: q.outputTPSPerUser(), PrefillTPSPerUser: q.prefillTPSPerUser(), CacheHitRate: q.cacheHitRate(),
	}
}

// WritePerRequest writes one row per analyzed request to path: zstd
// Parquet when it ends in .parquet, CSV (with a header) when in .csv.
func (s *Summary) WritePerRequest(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		return s.writePerRequestParquet(path)
	case ".csv":
		return s.writePerRequestCSV(path)
	}
	return fmt.Errorf("%s: expected a .parquet or .csv file name: %w", path, ErrBadInput)
}

// RequestsFormat is the per-request Parquet file's format name and schema
// version (trace.MetaFormat, trace.MetaSchemaVersion).
var RequestsFormat = trace.FileFormat{Name: "tracekit.requests", Version: 1}

func (s *Summary) writePerRequestParquet(path string) error {
	return writeRowsParquet(path, len(s.Reqs), func(i int) RequestRow { return s.row(&s.Reqs[i]) })
}

// writeRowsParquet writes rows 0..n-1 of row to path, a row group at a
// time.
func writeRowsParquet(path string, n int, row func(int) RequestRow) error {
	w, err := trace.CreateParquet[RequestRow](path, RequestsFormat)
	if err != nil {
		return fmt.Errorf("writing per-request file: %w", err)
	}
	batch := make([]RequestRow, 0, trace.RowGroupRows)
	for i := range n {
		batch = append(batch, row(i))
		if len(batch) == cap(batch) || i == n-1 {
			if err := w.Write(batch...); err != nil {
				w.Abort()
				return err
			}
			batch = batch[:0]
		}
	}
	return w.Close()
}

// ReadPerRequest reads a per-request Parquet file written by
// WritePerRequest.
func ReadPerRequest(path string) ([]RequestRow, error) {
	return trace.ReadParquet[RequestRow](path, RequestsFormat, "", nil)
}

// csvHeader is the parquet column names of RequestRow, in field order.
func csvHeader() []string {
	t := reflect.TypeFor[RequestRow]()
	h := make([]string, t.NumField())
	for i := range h {
		h[i] = t.Field(i).Tag.Get("parquet")
	}
	return h
}

func (s *Summary) writePerRequestCSV(path string) error {
	return writeRowsCSV(path, len(s.Reqs), func(i int) RequestRow { return s.row(&s.Reqs[i]) })
}

// writeRowsCSV writes a header and rows 0..n-1 of row to path.
func writeRowsCSV(path string, n int, row func(int) RequestRow) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing per-request file: %w", err)
	}
	w := csv.NewWriter(f)
	w.Write(csvHeader())
	rec := make([]string, len(csvHeader()))
	for i := range n {
		v := reflect.ValueOf(row(i))
		for j := range rec {
			switch x := v.Field(j).Interface().(type) {
			case float64:
				rec[j] = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				rec[j] = fmt.Sprint(x)
			}
		}
		if err := w.Write(rec); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return nil
}
