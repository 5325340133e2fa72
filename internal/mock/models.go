package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ModelConfig is one more model the mock serves beside Config.Model, as a
// router in front of several model servers does: its name and the latency
// settings that differ from the base's (Config.Latency).
type ModelConfig struct {
	Name string `json:"name"`
	// Latency holds the keys of Latency this model sets (a partial
	// override, e.g. {"decode_base":"30ms"}); the other keys keep the
	// base's. Empty: the base's latency. max_num_seqs and
	// prefix_cache_tokens are the server's (one batch, one cache) and
	// cannot be set per model.
	Latency json.RawMessage `json:"latency,omitempty"`
}

// modelLatencies resolves every served model's latency: Config.Model's is
// the base, each of Models' is its override over the base.
func (c Config) modelLatencies() (map[string]*Latency, error) {
	base := c.Latency
	out := map[string]*Latency{c.Model: &base}
	for i, m := range c.Models {
		if m.Name == "" {
			return nil, fmt.Errorf("models[%d]: name must not be empty", i)
		}
		if _, dup := out[m.Name]; dup {
			return nil, fmt.Errorf("models[%d]: model %q is served twice", i, m.Name)
		}
		l := base
		if len(bytes.TrimSpace(m.Latency)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(m.Latency))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&l); err != nil {
				return nil, fmt.Errorf("models[%d] (%s): latency: %w", i, m.Name, err)
			}
		}
		if l.MaxNumSeqs != base.MaxNumSeqs || l.PrefixCacheTokens != base.PrefixCacheTokens {
			return nil, fmt.Errorf("models[%d] (%s): latency: max_num_seqs and prefix_cache_tokens are the server's, set them in the base latency", i, m.Name)
		}
		if err := (Config{Latency: l}).validateLatency(); err != nil {
			return nil, fmt.Errorf("models[%d] (%s): %w", i, m.Name, err)
		}
		out[m.Name] = &l
	}
	return out, nil
}

// servedNames lists the served models, Config.Model first.
func (c Config) servedNames() []string {
	names := []string{c.Model}
	for _, m := range c.Models {
		names = append(names, m.Name)
	}
	return names
}
