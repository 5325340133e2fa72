package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// VLLMConfig is vLLM's multi-turn generation config
// (benchmarks/multi_turn/generate_multi_turn.json) converted to tracekit
// terms: Turns counts user turns (vLLM's num_turns counts user and
// assistant messages; see UserTurns).
type VLLMConfig struct {
	Conversations int // 0 when the file does not say
	// TextFiles are the corpus files, each as named when it exists, else
	// relative to the config file's folder.
	TextFiles          []string
	Turns              Dist
	CommonPrefixTokens Dist
	PrefixTokens       Dist
	InputTokens        Dist
	OutputTokens       Dist
}

// ReadVLLMConfig reads a vLLM multi-turn generation config file. Errors
// name the file and the field ("prompt_input.num_turns.min").
func ReadVLLMConfig(path string) (VLLMConfig, error) {
	b, err := ReadInput(path)
	if err != nil {
		return VLLMConfig{}, fmt.Errorf("reading config: %w", err)
	}
	var raw struct {
		Filetype         string                     `json:"filetype"`
		NumConversations *int                       `json:"num_conversations"`
		TextFiles        []string                   `json:"text_files"`
		PromptInput      map[string]json.RawMessage `json:"prompt_input"`
		PromptOutput     map[string]json.RawMessage `json:"prompt_output"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		f := jsonFaultOf(err)
		off := f.off
		if f.relative {
			off += int64(len(b) - len(bytes.TrimLeft(b, " \t\r\n")))
		}
		return VLLMConfig{}, f.rowError(path, b, 1, off, "")
	}
	fail := func(field string, err error) (VLLMConfig, error) {
		return VLLMConfig{}, fmt.Errorf("%s: field %s: %w", path, field, err)
	}
	if raw.Filetype != "" && raw.Filetype != "generate_conversations" {
		return fail("filetype", fmt.Errorf("%q, want \"generate_conversations\"", raw.Filetype))
	}
	var c VLLMConfig
	if raw.NumConversations != nil {
		if *raw.NumConversations <= 0 {
			return fail("num_conversations", fmt.Errorf("%d, want > 0", *raw.NumConversations))
		}
		c.Conversations = *raw.NumConversations
	}
	for _, f := range raw.TextFiles {
		c.TextFiles = append(c.TextFiles, resolveNear(path, f))
	}
	get := func(sec map[string]json.RawMessage, section, name string, optional bool) (Dist, error) {
		field := section + "." + name
		m, ok := sec[name]
		if !ok {
			if optional {
				return Constant{V: 0}, nil
			}
			return nil, fmt.Errorf("%s: field %s: missing", path, field)
		}
		d, err := vllmDist(m)
		if err != nil {
			return nil, fmt.Errorf("%s: field %s: %w", path, field, err)
		}
		return d, nil
	}
	if raw.PromptInput == nil {
		return fail("prompt_input", errors.New("missing"))
	}
	if raw.PromptOutput == nil {
		return fail("prompt_output", errors.New("missing"))
	}
	msgs, err := get(raw.PromptInput, "prompt_input", "num_turns", false)
	if err != nil {
		return VLLMConfig{}, err
	}
	c.Turns = UserTurns{Messages: msgs}
	if c.InputTokens, err = get(raw.PromptInput, "prompt_input", "num_tokens", false); err != nil {
		return VLLMConfig{}, err
	}
	if c.CommonPrefixTokens, err = get(raw.PromptInput, "prompt_input", "common_prefix_num_tokens", true); err != nil {
		return VLLMConfig{}, err
	}
	if c.PrefixTokens, err = get(raw.PromptInput, "prompt_input", "prefix_num_tokens", true); err != nil {
		return VLLMConfig{}, err
	}
	if c.OutputTokens, err = get(raw.PromptOutput, "prompt_output", "num_tokens", false); err != nil {
		return VLLMConfig{}, err
	}
	return c, nil
}

// Apply sets o's count (when the config has one) and distributions from
// the config; ThinkTime, Seed and Corpus are left as they are.
func (c VLLMConfig) Apply(o *SyntheticOptions) {
	if c.Conversations > 0 {
		o.Count = c.Conversations
	}
	o.Turns, o.InputTokens, o.OutputTokens = c.Turns, c.InputTokens, c.OutputTokens
	o.PrefixTokens, o.CommonPrefixTokens = c.PrefixTokens, c.CommonPrefixTokens
}

// vllmDist converts one {"distribution": ..., ...} object by rewriting it
// into ParseDist's syntax, so both front ends share one set of rules.
func vllmDist(m json.RawMessage) (Dist, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m, &obj); err != nil {
		return nil, fmt.Errorf("want an object with a \"distribution\" key: %w", err)
	}
	nameRaw, ok := obj["distribution"]
	if !ok {
		return nil, errors.New("missing \"distribution\"")
	}
	var name string
	if err := json.Unmarshal(nameRaw, &name); err != nil {
		return nil, fmt.Errorf("\"distribution\" is not a string: %s", nameRaw)
	}
	var parts []string
	for k, v := range obj {
		if k == "distribution" {
			continue
		}
		var num json.Number
		if err := json.Unmarshal(v, &num); err != nil {
			return nil, fmt.Errorf("%q is not a number: %s", k, v)
		}
		parts = append(parts, k+"="+num.String())
	}
	sort.Strings(parts)
	return ParseDist(name+":"+strings.Join(parts, ","), Count)
}
