package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// SWEAgent imports SWE-agent trajectories (.traj: one JSON object per
// agent session, {environment, trajectory, history, info}) as chat
// conversations: the history is the chat as the model saw it, and every
// assistant message of it is one model call. The rules:
//
//   - call k's messages are the history's messages after the previous
//     assistant message up to its own (the system prompt, demonstrations
//     and the task for the first; the observation, a tool result, for the
//     next): the prompt grows by appending, so the default chat edges
//     (each call after the one before, with its transcript) rebuild it;
//   - the assistant message is the reference answer, its tool_calls the
//     reference tool calls; its tokens are the output length;
//   - the think time before call k+1 is step k's execution_time (the
//     tool's run time, seconds; 0 when the file has none), so tool
//     latency is kept; there are no timestamps otherwise.
//
// Tokens are counted with Tokenizer. A session is named by its file
// (without .traj). The conversations start on the --rate schedule.
type SWEAgent struct {
	Opts   SWEAgentOptions
	report sweReport
}

// SWEAgentOptions configure a SWE-agent import.
type SWEAgentOptions struct {
	Path      string // a .traj file or a directory of them
	Tokenizer tokenizer.Tokenizer
	Limit     int    // keep the first Limit sessions in name order; 0 all
	Model     string // stamped on every request when set
	MaxBytes  int64  // refuse inputs larger in total; 0 no limit
}

var (
	_ Source   = (*SWEAgent)(nil)
	_ Reporter = (*SWEAgent)(nil)
)

// NewSWEAgent checks o and returns the source.
func NewSWEAgent(o SWEAgentOptions) (*SWEAgent, error) {
	const st = "SWEAgentOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file or directory")
	case o.Tokenizer == nil:
		return nil, fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Limit < 0:
		return nil, fieldErr(st, "Limit", "%d is negative", o.Limit)
	}
	return &SWEAgent{Opts: o}, nil
}

func (s *SWEAgent) Name() string { return "swe-agent" }

type sweReport struct {
	files, calls, toolCalls, withLatency, trailing int
}

// Report says what was read.
func (s *SWEAgent) Report() map[string]string {
	r := s.report
	return map[string]string{
		"sessions":                   strconv.Itoa(r.files),
		"calls":                      strconv.Itoa(r.calls),
		"answers_with_tool_calls":    strconv.Itoa(r.toolCalls),
		"think_times_from_execution": strconv.Itoa(r.withLatency),
		"trailing_messages_unsent":   strconv.Itoa(r.trailing),
	}
}

type sweTraj struct {
	Environment string `json:"environment"`
	Trajectory  []struct {
		ExecutionTime json.RawMessage `json:"execution_time"`
	} `json:"trajectory"`
	History []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallIDs []string `json:"tool_call_ids"`
	} `json:"history"`
}

// Conversations reads every file.
func (s *SWEAgent) Conversations(ctx context.Context) ([]Conversation, error) {
	files, err := sweFiles(s.Opts.Path)
	if err != nil {
		return nil, err
	}
	s.report = sweReport{}
	var convs []Conversation
	var total int64
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.Opts.Limit > 0 && len(convs) == s.Opts.Limit {
			break
		}
		b, err := ReadInput(path)
		if err != nil {
			return nil, err
		}
		total += int64(len(b))
		if s.Opts.MaxBytes > 0 && total > s.Opts.MaxBytes {
			return nil, fieldErr("SWEAgentOptions", "MaxBytes", "%w: the inputs hold more than %s", ErrTooLarge, formatBytes(float64(s.Opts.MaxBytes)))
		}
		var tr sweTraj
		if err := json.Unmarshal(b, &tr); err != nil {
			f := jsonFaultOf(err)
			return nil, f.rowError(path, b, 1, f.off, "")
		}
		c, err := s.conversation(path, &tr)
		if err != nil {
			return nil, err
		}
		if len(c) > 0 {
			convs = append(convs, c)
		}
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: %w: no assistant message in any history", s.Opts.Path, ErrNoConversations)
	}
	s.report.files = len(convs)
	return convs, nil
}

func sweFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", path, err)
	}
	var files []string
	for _, e := range ents {
		n := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".gz"), ".zst")
		if e.Type().IsRegular() && !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".traj") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s: no .traj file", path)
	}
	return files, nil
}

// conversation builds one session's calls.
func (s *SWEAgent) conversation(path string, tr *sweTraj) (Conversation, error) {
	id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".gz"), ".zst"), ".traj")
	tok := s.Opts.Tokenizer
	var conv Conversation
	var pending []trace.Message
	for i, h := range tr.History {
		field := fmt.Sprintf("history[%d]", i)
		bad := func(format string, args ...any) error {
			return &RowError{File: path, Line: 1, Field: field, Err: fmt.Errorf(format, args...)}
		}
		var content string
		if len(h.Content) > 0 && string(h.Content) != "null" {
			if err := json.Unmarshal(h.Content, &content); err != nil {
				var parts []struct {
					Type, Text string
				}
				if json.Unmarshal(h.Content, &parts) != nil {
					return nil, bad("content: want a string or an array of text parts")
				}
				for _, p := range parts {
					content += p.Text
				}
			}
		}
		m := trace.Message{Role: h.Role, Content: content}
		switch h.Role {
		case "system", "user":
		case "tool":
			if len(h.ToolCallIDs) > 0 {
				m.ToolCallID = h.ToolCallIDs[0]
			}
		case "assistant":
			for _, c := range h.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, trace.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
			k := len(conv)
			t := trace.Turn{ConversationID: id, Turn: int32(k), Messages: pending, Model: s.Opts.Model,
				ReferenceAnswer: content, ReferenceToolCalls: m.ToolCalls}
			for j := range t.Messages {
				t.Messages[j].Tokens = int32(messageTokens(tok, t.Messages[j]))
				t.InputTokens += t.Messages[j].Tokens
			}
			t.OutputTokens = int32(max(messageTokens(tok, m), 1))
			if k > 0 && k-1 < len(tr.Trajectory) {
				if sec, ok := sweSeconds(tr.Trajectory[k-1].ExecutionTime); ok {
					t.ThinkTimeNs = int64(math.Round(sec * 1e9))
					s.report.withLatency++
				}
			}
			if len(m.ToolCalls) > 0 {
				s.report.toolCalls++
			}
			conv = append(conv, t)
			pending = nil
			continue
		default:
			return nil, bad("role %q: want system, user, assistant or tool", h.Role)
		}
		pending = append(pending, m)
	}
	s.report.trailing += len(pending)
	s.report.calls += len(conv)
	return conv, nil
}

// sweSeconds reads an execution_time: a number or a numeric string.
func sweSeconds(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, f >= 0
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if f, err := strconv.ParseFloat(str, 64); err == nil && f >= 0 {
			return f, true
		}
	}
	return 0, false
}
