package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// ParseModelMix reads a model mix, "name=weight,name=weight,...": each
// weight a share (they need not add up to 1: each model gets its weight
// over their sum), every name once.
func ParseModelMix(s string) ([]WeightedModel, error) {
	var out []WeightedModel
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=weight", part)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("%q: the weight must be a number above 0", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("model %q named twice", name)
		}
		seen[name] = true
		out = append(out, WeightedModel{Name: name, Weight: v})
	}
	return out, nil
}

// pickModel draws a model name with probability weight / sum of weights.
func pickModel(ms []WeightedModel, r *rand.Rand) string {
	sum := 0.0
	for _, m := range ms {
		sum += m.Weight
	}
	u := r.Float64() * sum
	for _, m := range ms {
		if u < m.Weight {
			return m.Name
		}
		u -= m.Weight
	}
	return ms[len(ms)-1].Name
}
