package sweep

import "github.com/tracekit/tracekit/internal/analyze"

// SteadyMinCompleted is the fewest completions a step's steady window
// must hold for its rate to stand for the step's throughput.
const SteadyMinCompleted = 20

// StepSteady is a step's steady window (analyze.SteadyState): where it
// lies in the step's recording and its figures. Rates per second,
// latencies in milliseconds.
type StepSteady struct {
	FromS             float64 `json:"from_s"`
	ToS               float64 `json:"to_s"`
	DurationS         float64 `json:"duration_s"`
	PeakInFlight      int     `json:"peak_in_flight"`
	MeanInFlight      float64 `json:"mean_in_flight"`
	Completed         int     `json:"completed"`
	RequestThroughput float64 `json:"request_throughput"`
	OutputThroughput  float64 `json:"output_throughput"`
	TTFT              Dist    `json:"ttft"`
	ITL               Dist    `json:"itl"`
}

// stepSteady reads the steady window of a step's analysis; nil when it
// found none.
func stepSteady(s *analyze.Summary) *StepSteady {
	st := s.Steady
	if st == nil {
		return nil
	}
	return &StepSteady{FromS: float64(st.FromNs) / 1e9, ToS: float64(st.ToNs) / 1e9, DurationS: st.Duration,
		PeakInFlight: st.PeakInFlight, MeanInFlight: st.MeanInFlight, Completed: st.Completed,
		RequestThroughput: st.RequestThroughput, OutputThroughput: st.OutputThroughput,
		TTFT: dist(st.TTFT), ITL: dist(st.ITL)}
}
