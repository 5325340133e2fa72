package analyze

import (
	"github.com/tracekit/tracekit/trace"
)

// FileHealth is one recording's client health figures.
type FileHealth struct {
	Path string        `json:"path"`
	H    *trace.Health `json:"health"`
}

// warnSendDelayNs is the p99 send delay (sent - slot, measured from the
// records, which the client's own health figures do not cover) above which
// the client was late sending.
const warnSendDelayNs = 5e6

func (s *Summary) health() {
	for _, f := range s.Files {
		h := f.Meta.Health
		if h == nil {
			continue
		}
		s.Health = append(s.Health, FileHealth{Path: f.Path, H: h})
		for _, w := range h.Assess() { // one verdict per cause, whatever the file stored
			s.Warnings = append(s.Warnings, f.Path+": "+w)
		}
	}
	if s.Completed > 0 {
		if p99 := s.dists["send_delay"].Quantile(99); p99 > warnSendDelayNs {
			s.Warnings = append(s.Warnings, "recorded send delay (sent - slot) p99 "+fmtMs(int64(p99))+" > 5 ms: the client was late sending")
		}
	}
}
