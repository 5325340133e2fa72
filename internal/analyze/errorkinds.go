package analyze

import (
	"cmp"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// ErrorCount counts failed requests of one kind.
type ErrorCount struct {
	Kind    string `json:"kind"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"` // first error message seen
}

func (s *Summary) errors(examples map[string]string) {
	counts := map[string]int{}
	for i := range s.Reqs {
		if !s.Reqs[i].Success && s.Reqs[i].ErrorKind != string(trace.ErrCanceledByClient) {
			counts[s.Reqs[i].ErrorKind]++
		}
	}
	for k, n := range counts {
		s.Errors = append(s.Errors, ErrorCount{Kind: k, Count: n, Example: examples[k]})
	}
	slices.SortFunc(s.Errors, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Kind, b.Kind))
	})
}
