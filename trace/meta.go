package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// LoadSettings returns the run's load configuration: Load when the
// recording has it, else what the Config map of an older recording holds
// under the keys replay wrote (model, max_concurrency; request_rate and
// burstiness when present).
func (m RunMeta) LoadSettings() RunLoad {
	if m.Load != nil {
		return *m.Load
	}
	var l RunLoad
	l.Model = configString(m.Config, "model", "served_model_name")
	if v, ok := configNumber(m.Config, "max_concurrency", "concurrency", "max-concurrency"); ok && v > 0 {
		l.MaxConcurrency = int(v)
	}
	if v, ok := configNumber(m.Config, "request_rate", "rate", "request-rate"); ok && v > 0 {
		l.RequestRate = v
	}
	if v, ok := configNumber(m.Config, "burstiness"); ok && v > 0 {
		l.Burstiness = v
	}
	return l
}

func configString(c map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := c[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

func configNumber(c map[string]any, keys ...string) (float64, bool) {
	for _, k := range keys {
		switch v := c[k].(type) {
		case float64:
			return v, true
		case int:
			return float64(v), true
		case int64:
			return float64(v), true
		case string:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f, true
			}
		}
	}
	return 0, false
}

// Client-health limits: above them the recorded latencies likely include
// the client's own delay.
const (
	HealthDispatchLagNs = 1e6 // p99 dispatch lag
	HealthSchedLatNs    = 1e6 // p99 Go scheduler latency
	HealthCPUShare      = 0.8 // of Cores, over a run longer than a second
)

// Assess judges the client's health once, one warning per cause: dispatch
// lag p99 over HealthDispatchLagNs, scheduler latency p99 over
// HealthSchedLatNs, CPU use over HealthCPUShare of Cores. The recorder
// stores the result in Warnings; every reader prints Assess, never both.
// A recording written before Cores was stored keeps its recorder's own
// CPU-bound verdict.
func (h *Health) Assess() []string {
	var w []string
	if h.DispatchLagP99Ns > HealthDispatchLagNs {
		w = append(w, fmt.Sprintf("dispatch lag p99 %.2f ms: requests left later than scheduled", float64(h.DispatchLagP99Ns)/1e6))
	}
	if h.SchedLatP99Ns > HealthSchedLatNs {
		w = append(w, fmt.Sprintf("Go scheduler latency p99 %.2f ms: event timestamps may be late by up to that", float64(h.SchedLatP99Ns)/1e6))
	}
	switch {
	case h.Cores > 0:
		if h.WallSeconds > 1 && h.CPUSeconds/h.WallSeconds > HealthCPUShare*float64(h.Cores) {
			w = append(w, fmt.Sprintf("the client used %.1f of %d cores: it was CPU-bound and its timings are suspect", h.CPUSeconds/h.WallSeconds, h.Cores))
		}
	default:
		for _, s := range h.Warnings {
			if strings.Contains(s, "CPU-bound") {
				w = append(w, s)
			}
		}
	}
	return w
}
