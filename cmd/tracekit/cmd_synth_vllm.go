package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// vllmCommand is a vllm bench serve command line read by --from-vllm:
// the synth flags it sets and the replay and analyze flags that send the
// trace as vLLM would.
type vllmCommand struct {
	synth   [][2]string // synth flag, value (in the order read)
	replay  []string    // replay arguments
	analyze []string    // analyze arguments
	target  string
	noted   []string // flags accepted with no effect on the workload
}

// vllmIgnorable change vLLM's own output files or logging only.
var vllmIgnorable = map[string]bool{"save-result": false, "save-detailed": false, "result-dir": true, "result-filename": true,
	"label": true, "disable-tqdm": false, "trust-remote-code": false, "percentile-metrics": true, "metadata": true}

// vllmBool are vLLM's flags that take no value.
var vllmBool = map[string]bool{"ignore-eos": true, "no-oversample": true, "disable-shuffle": true}

// parseVLLMCommand reads line, a vllm bench serve (or benchmark_serving.py)
// command line. Words before the first flag (vllm bench serve, python
// benchmarks/benchmark_serving.py) are skipped. A flag tracekit cannot
// honour is an error naming it.
func parseVLLMCommand(line string) (*vllmCommand, error) {
	words, err := shellWords(line)
	if err != nil {
		return nil, err
	}
	for len(words) > 0 && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	c := &vllmCommand{}
	host, port, endpoint, backend := "127.0.0.1", "8000", "", ""
	var goodput []string
	set := func(k, v string) { c.synth = append(c.synth, [2]string{k, v}) }
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") {
			return nil, fmt.Errorf("%q: expected a --flag", w)
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		takesValue := !vllmBool[name]
		if ig, ok := vllmIgnorable[name]; ok {
			takesValue = ig
		}
		if takesValue && !hasVal && name != "goodput" {
			if i+1 >= len(words) {
				return nil, fmt.Errorf("--%s: missing its value", name)
			}
			i++
			val = words[i]
		}
		switch name {
		case "dataset-name":
			switch val {
			case "sharegpt":
				set("source", "vllm-sharegpt")
			case "random":
				set("source", "vllm-random")
			default:
				return nil, fmt.Errorf("--dataset-name %s: tracekit reads vLLM's sharegpt and random datasets only", val)
			}
		case "dataset-path":
			set("input", val)
		case "num-prompts":
			set("conversations", val)
		case "seed", "sharegpt-output-len", "random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len", "burstiness":
			set(name, val)
		case "no-oversample", "disable-shuffle":
			set(name, "true")
		case "request-rate":
			if strings.EqualFold(val, "inf") {
				val = "0"
			}
			set("rate", val)
		case "max-concurrency":
			if _, err := strconv.Atoi(val); err != nil {
				return nil, fmt.Errorf("--max-concurrency %q: want an integer", val)
			}
			c.replay = append(c.replay, "--max-concurrency", val)
		case "ignore-eos":
			c.replay = append(c.replay, "--ignore-eos")
		case "model", "served-model-name":
			c.replay = append(c.replay, "--model", val)
		case "temperature":
			c.replay = append(c.replay, "--temperature", val)
		case "base-url":
			c.target = val
		case "host":
			host = val
		case "port":
			port = val
		case "endpoint":
			endpoint = val
		case "backend":
			backend = val
		case "tokenizer":
			set("tokenizer", val)
		case "goodput":
			if hasVal {
				goodput = append(goodput, val)
			}
			for i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
				goodput = append(goodput, words[i])
			}
		case "metric-percentiles":
			c.analyze = append(c.analyze, "--percentiles", val)
		default:
			if _, ok := vllmIgnorable[name]; ok {
				c.noted = append(c.noted, "--"+name)
				continue
			}
			return nil, fmt.Errorf("--%s: tracekit cannot honour this vllm bench serve flag", name)
		}
	}
	if len(goodput) > 0 {
		c.analyze = append(c.analyze, "--goodput", strings.Join(goodput, ","))
	}
	if c.target == "" {
		c.target = "http://" + host + ":" + port
	}
	ep := "completions" // vLLM's default backend, openai, posts to /v1/completions
	switch {
	case endpoint == "/v1/chat/completions" || (endpoint == "" && backend == "openai-chat"):
		ep = "chat"
	case endpoint == "" || endpoint == "/v1/completions":
	default:
		return nil, fmt.Errorf("--endpoint %s: tracekit sends /v1/completions or /v1/chat/completions", endpoint)
	}
	switch backend {
	case "", "openai", "vllm", "openai-chat":
	default:
		return nil, fmt.Errorf("--backend %s: tracekit speaks the OpenAI API (backends openai, vllm, openai-chat)", backend)
	}
	c.replay = append([]string{"--target", c.target, "--endpoint", ep}, c.replay...)
	return c, nil
}

// apply sets the synth flags the command gives; a flag also given to
// synth itself keeps synth's value (so --tokenizer can replace a model id).
func (c *vllmCommand) apply(f *pflag.FlagSet) error {
	given := map[string]bool{}
	f.Visit(func(fl *pflag.Flag) { given[fl.Name] = true })
	if given["source"] {
		return errors.New("--from-vllm sets the source: leave --source out")
	}
	source := ""
	for _, kv := range c.synth {
		if kv[0] == "source" {
			source = kv[1]
		}
		if given[kv[0]] {
			continue
		}
		if err := f.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("--from-vllm: --%s %q: %w", kv[0], kv[1], err)
		}
	}
	if source == "" { // vLLM's default dataset
		if err := f.Set("source", "vllm-random"); err != nil {
			return err
		}
	}
	return nil
}

// shellWords splits a command line as a POSIX shell would for plain
// words, single and double quotes, backslash escapes and line
// continuations; no expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				inWord = true
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("--from-vllm: unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`--from-vllm: unterminated " quote`)
			}
			inWord = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
