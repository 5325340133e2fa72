package sweep

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/tracekit/tracekit/internal/jsonpos"
)

// Files a sweep writes into its directory, next to the steps' files.
const (
	SummaryJSON    = "sweep.json"
	SummaryParquet = "sweep.parquet"
	SummaryHTML    = "sweep.html"
	SummaryText    = "sweep.txt"
)

// Parquet metadata of sweep.parquet.
const (
	FormatSweep        = "tracekit.sweep"
	SweepSchemaVersion = 1
)

// WriteAll writes the summary's JSON, Parquet, HTML and text files into
// dir, each through a temporary file renamed into place.
func (s *Summary) WriteAll(dir string) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{SummaryJSON, s.WriteJSON}, {SummaryParquet, s.WriteParquet},
		{SummaryHTML, s.WriteHTML}, {SummaryText, s.WriteText},
	} {
		if err := WriteFileAtomic(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the summary as indented JSON (sweep.json).
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encoding the sweep summary: %w", err)
	}
	return nil
}

// ReadSummary reads a sweep.json, or the one in a sweep directory.
func ReadSummary(path string) (*Summary, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, SummaryJSON)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sweep summary: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		// One value decoded from the start: a type error's offset is
		// absolute too.
		if at := jsonpos.Locate(err).At(b); at != "" {
			return nil, fmt.Errorf("%s: %s: not a sweep summary: %w", path, at, err)
		}
		return nil, fmt.Errorf("%s: not a sweep summary: %w", path, err)
	}
	if s.Plan.Axis == "" {
		return nil, fmt.Errorf("%s: not a sweep summary (no plan.axis)", path)
	}
	return &s, nil
}

// Row is one step as a row of sweep.parquet: flat columns for SQL.
type Row struct {
	Step                 int64    `parquet:"step"`
	Axis                 string   `parquet:"axis"`
	Load                 float64  `parquet:"load"`
	Speed                float64  `parquet:"speed"`
	MaxConcurrency       int64    `parquet:"max_concurrency"`
	Recording            string   `parquet:"recording"`
	Report               string   `parquet:"report"`
	OfferedConvRate      float64  `parquet:"offered_conv_rate"`
	OfferedRate          float64  `parquet:"offered_rate"`
	Requests             int64    `parquet:"requests"`
	Completed            int64    `parquet:"completed"`
	Failed               int64    `parquet:"failed"`
	Canceled             int64    `parquet:"canceled"`
	Errors               int64    `parquet:"errors"`
	ErrorRate            float64  `parquet:"error_rate"`
	DurationS            float64  `parquet:"duration_s"`
	RequestThroughput    float64  `parquet:"request_throughput"`
	OutputThroughput     float64  `parquet:"output_throughput"`
	TotalTokenThroughput float64  `parquet:"total_token_throughput"`
	Throughput           float64  `parquet:"throughput"`
	Good                 int64    `parquet:"good"`
	GoodFraction         float64  `parquet:"good_fraction"`
	RequestGoodput       float64  `parquet:"request_goodput"`
	MeanTTFTms           float64  `parquet:"mean_ttft_ms"`
	MedianTTFTms         float64  `parquet:"median_ttft_ms"`
	P90TTFTms            float64  `parquet:"p90_ttft_ms"`
	P99TTFTms            float64  `parquet:"p99_ttft_ms"`
	MeanTPOTms           float64  `parquet:"mean_tpot_ms"`
	MedianTPOTms         float64  `parquet:"median_tpot_ms"`
	P90TPOTms            float64  `parquet:"p90_tpot_ms"`
	P99TPOTms            float64  `parquet:"p99_tpot_ms"`
	MeanITLms            float64  `parquet:"mean_itl_ms"`
	MedianITLms          float64  `parquet:"median_itl_ms"`
	P90ITLms             float64  `parquet:"p90_itl_ms"`
	P99ITLms             float64  `parquet:"p99_itl_ms"`
	MeanE2ELms           float64  `parquet:"mean_e2el_ms"`
	MedianE2ELms         float64  `parquet:"median_e2el_ms"`
	P90E2ELms            float64  `parquet:"p90_e2el_ms"`
	P99E2ELms            float64  `parquet:"p99_e2el_ms"`
	Checks               []Check  `parquet:"checks,list"`
	DispatchLagP99ms     float64  `parquet:"dispatch_lag_p99_ms"`
	SchedLatP99ms        float64  `parquet:"sched_latency_p99_ms"`
	SendDelayP99ms       float64  `parquet:"send_delay_p99_ms"`
	ClientCPU            float64  `parquet:"client_cpu"`
	HealthWarnings       []string `parquet:"health_warnings,list"`
	Distorted            bool     `parquet:"distorted"`
	Distortions          []string `parquet:"distortions,list"`
	Stopped              string   `parquet:"stopped"`
	Interrupted          bool     `parquet:"interrupted"`
	Pass                 bool     `parquet:"pass"`
	Verdict              string   `parquet:"verdict"`
	Reasons              []string `parquet:"reasons,list"`
	Knee                 bool     `parquet:"knee"`   // this step is the knee
	Answer               bool     `parquet:"answer"` // this step is the SLO answer
}

// finite turns NaN (a percentile with no sample) into 0 for the files.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Rows returns the steps as sweep.parquet rows.
func (s *Summary) Rows() []Row {
	rows := make([]Row, len(s.Steps))
	for i := range s.Steps {
		r := &s.Steps[i]
		rows[i] = Row{
			Step: int64(r.Index), Axis: string(r.Load.Axis), Load: r.Load.Value, Speed: r.Speed, MaxConcurrency: int64(r.MaxConcurrency),
			Recording: r.Recording, Report: r.Report, OfferedConvRate: r.OfferedConvRate, OfferedRate: r.OfferedRate,
			Requests: int64(r.Requests), Completed: int64(r.Completed), Failed: int64(r.Failed), Canceled: int64(r.Canceled), Errors: int64(r.Errors),
			ErrorRate: r.ErrorRate, DurationS: r.DurationS, RequestThroughput: r.RequestThroughput,
			OutputThroughput: r.OutputThroughput, TotalTokenThroughput: r.TotalTokenThroughput, Throughput: r.Throughput,
			Good: int64(r.Good), GoodFraction: r.GoodFraction, RequestGoodput: r.RequestGoodput,
			MeanTTFTms: r.TTFT.Mean, MedianTTFTms: r.TTFT.Median, P90TTFTms: finite(r.TTFT.P90), P99TTFTms: finite(r.TTFT.P99),
			MeanTPOTms: r.TPOT.Mean, MedianTPOTms: r.TPOT.Median, P90TPOTms: finite(r.TPOT.P90), P99TPOTms: finite(r.TPOT.P99),
			MeanITLms: r.ITL.Mean, MedianITLms: r.ITL.Median, P90ITLms: finite(r.ITL.P90), P99ITLms: finite(r.ITL.P99),
			MeanE2ELms: r.E2EL.Mean, MedianE2ELms: r.E2EL.Median, P90E2ELms: finite(r.E2EL.P90), P99E2ELms: finite(r.E2EL.P99),
			Checks:           append([]Check(nil), r.Checks...),
			DispatchLagP99ms: r.DispatchLagP99Ms, SchedLatP99ms: r.SchedLatP99Ms, SendDelayP99ms: r.SendDelayP99Ms, ClientCPU: r.ClientCPU,
			HealthWarnings: r.HealthWarnings, Distorted: r.Distorted, Distortions: r.Distortions,
			Stopped: r.Stopped, Interrupted: r.Interrupted, Pass: r.Pass, Verdict: r.Verdict, Reasons: r.Reasons,
			Knee:   s.Knee != nil && s.Knee.Step == r.Index,
			Answer: s.Answer != nil && s.Answer.Found && s.Answer.Lower == r.Index,
		}
		for k := range rows[i].Checks {
			rows[i].Checks[k].ValueMs = finite(rows[i].Checks[k].ValueMs)
		}
	}
	return rows
}

// WriteParquet writes one row per step (sweep.parquet).
func (s *Summary) WriteParquet(w io.Writer) error {
	pw := parquet.NewGenericWriter[Row](w,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.KeyValueMetadata("tracekit.format", FormatSweep),
		parquet.KeyValueMetadata("tracekit.schema_version", strconv.Itoa(SweepSchemaVersion)),
	)
	if _, err := pw.Write(s.Rows()); err != nil {
		return fmt.Errorf("writing sweep rows: %w", err)
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("finishing sweep rows: %w", err)
	}
	return nil
}

// ReadRows reads sweep.parquet.
func ReadRows(path string) ([]Row, error) {
	rows, err := parquet.ReadFile[Row](path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rows, nil
}

// ms formats milliseconds for the table; NaN (no sample) as "-".
func ms(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func rate(v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func triple(d Dist) string { return ms(d.P50) + "/" + ms(d.P90) + "/" + ms(d.P99) }

// health is the table's health cell: dispatch lag p99, and DISTORTED.
func (r *StepResult) health() string {
	h := "lag " + strconv.FormatFloat(r.DispatchLagP99Ms, 'f', 2, 64) + "ms"
	if r.Distorted {
		h += " DISTORTED"
	}
	return h
}

// result is the table's result cell: the verdict and its first reason.
func (r *StepResult) result() string {
	v := r.Verdict
	if v == "" {
		v = "-"
	}
	switch {
	case r.Distorted && len(r.Distortions) > 0:
		v += ": " + r.Distortions[0]
	case len(r.Reasons) > 0:
		v += ": " + r.Reasons[0]
	}
	return v
}

// WriteText prints the sweep table, the knee and the SLO answer.
func (s *Summary) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, "tracekit sweep")
	if s.Info.Trace != "" {
		fmt.Fprintf(b, "trace:    %s", s.Info.Trace)
		if s.Info.TraceRate > 0 {
			fmt.Fprintf(b, " (%s conversation starts/s at speed 1)", FormatValue(s.Info.TraceRate))
		}
		fmt.Fprintln(b)
	}
	if len(s.Info.Targets) > 0 {
		fmt.Fprintf(b, "targets:  %s\n", strings.Join(s.Info.Targets, ", "))
	}
	mode := "ladder"
	if s.Plan.Search != nil {
		mode = fmt.Sprintf("search %s-%s from %s to %.3g%% resolution", FormatValue(s.Plan.Search.Min), FormatValue(s.Plan.Search.Max),
			FormatValue(s.Plan.Search.Start), 100*s.Plan.Search.Resolution)
	}
	fmt.Fprintf(b, "axis:     %s, %s\n", s.Plan.Axis, mode)
	if len(s.Criteria.SLO) > 0 {
		fmt.Fprintf(b, "SLO:      %s", s.Criteria.SLO)
		if s.Criteria.GoodputTarget > 0 {
			fmt.Fprintf(b, ", goodput >= %.3g%%", 100*s.Criteria.GoodputTarget)
		}
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "%-4s %-20s %9s %9s %-20s %-20s %-20s %7s %7s %-18s %s\n", "step", "load", "offered/s", "thrpt/s",
		"TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "ITL p50/p90/p99 ms", "goodput", "errors", "health", "result")
	for i := range s.Steps {
		r := &s.Steps[i]
		mark := ""
		if s.Knee != nil && s.Knee.Step == r.Index {
			mark += " [knee]"
		}
		if s.Answer != nil && s.Answer.Found && s.Answer.Lower == r.Index {
			mark += " [answer]"
		}
		good := "-"
		if len(s.Criteria.SLO) > 0 && r.Requests > 0 {
			good = strconv.FormatFloat(100*r.GoodFraction, 'f', 1, 64) + "%"
		}
		fmt.Fprintf(b, "%4d %-20s %9s %9s %-20s %-20s %-20s %7s %7d %-18s %s%s\n", r.Index, r.Load.String(), rate(r.OfferedRate), rate(r.Throughput),
			triple(r.TTFT), triple(r.TPOT), triple(r.ITL), good, r.Errors, r.health(), r.result(), mark)
	}
	s.writeRepeatText(b)
	s.writeServerText(b)
	if k := s.Knee; k != nil {
		fmt.Fprintf(b, "knee:     step %d (%s): %s req/s, %.0f%% of the highest throughput %s req/s", k.Step, Load{s.Plan.Axis, k.Load},
			rate(k.Throughput), 100*k.Throughput/k.MaxThroughput, rate(k.MaxThroughput))
		if !k.Reached {
			fmt.Fprint(b, " (not reached: no undistorted step past it flattened)")
		}
		fmt.Fprintln(b)
	}
	if a := s.Answer; a != nil {
		fmt.Fprintf(b, "answer:   %s\n", s.AnswerLine())
		for _, n := range a.Notes {
			fmt.Fprintf(b, "          note: %s\n", n)
		}
	}
	if s.Interrupted {
		fmt.Fprintln(b, "the sweep was interrupted: the steps above are the ones that finished")
	}
	if s.Error != "" && s.Answer == nil { // else the answer says it
		fmt.Fprintf(b, "the sweep stopped: %s\n", s.Error)
	}
	return b.Flush()
}

// step returns the step with index i, or nil.
func (s *Summary) step(i int) *StepResult {
	for k := range s.Steps {
		if s.Steps[k].Index == i {
			return &s.Steps[k]
		}
	}
	return nil
}

// AnswerLine is the SLO answer in one sentence, with its bounding steps.
func (s *Summary) AnswerLine() string {
	a := s.Answer
	if a == nil {
		return "no SLO given"
	}
	if !a.Found {
		reason := cmp.Or(a.Reason, "no load met the SLO") // summaries written before Reason
		if s.Error != "" {
			return "unresolved: " + reason
		}
		if up := s.step(a.Upper); up != nil && !a.Unmeasured {
			return fmt.Sprintf("%s; the lowest run, step %d (%s), failed: %s", reason, up.Index, up.Load, up.result())
		}
		return "none: " + reason
	}
	var b strings.Builder
	lo := s.step(a.Lower)
	fmt.Fprintf(&b, "%s", Load{s.Plan.Axis, a.Load})
	if a.OfferedConvRate > 0 && s.Plan.Axis != AxisRate {
		fmt.Fprintf(&b, " = %s conversations/s", FormatValue(a.OfferedConvRate))
	}
	fmt.Fprintf(&b, ", %s req/s served; bounded by step %d (pass)", rate(a.Throughput), lo.Index)
	if up := s.step(a.Upper); up != nil {
		fmt.Fprintf(&b, " and step %d (%s, %s)", up.Index, up.Load, up.result())
		fmt.Fprintf(&b, ", %.1f%% apart", 100*a.Ratio)
	} else {
		b.WriteString("; no load run failed")
	}
	return b.String()
}
