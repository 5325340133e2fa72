package calibrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// finish removes the offset (the probe's median diff) from every step,
// judges each step against maxErr and picks the faithful loads.
//
// A step passes when it ran to the end, every request succeeded, every
// event on either side found its partner, and its p99 error is at most
// maxErr.
//
// With several stamp modes or endpoints each (endpoint, mode) has its own
// probe, and a step's offset is its own: a kernel stamp is taken before the
// wake-up that a goroutine stamp includes, and a body's write and transit
// differ from an event's, so the constant parts differ.
func (rep *Report) finish(maxErr time.Duration) {
	offsets := map[string]int64{}
	first, named := true, false
	for _, r := range rep.Steps {
		if r.Step.Kind != KindProbe {
			continue
		}
		offsets[r.Step.offsetKey()] = r.RawMedianNs
		named = named || r.Step.offsetKey() != ""
		if first {
			rep.OffsetNs, first = r.RawMedianNs, false
		}
	}
	if named {
		rep.OffsetsNs = offsets
	}
	for i := range rep.Steps {
		r := &rep.Steps[i]
		off, ok := offsets[r.Step.offsetKey()]
		if !ok {
			off = rep.OffsetNs
		}
		d := r.diffs
		r.ErrMinNs, r.ErrP50Ns = quantile(d, 0)-off, quantile(d, 0.5)-off
		r.ErrP99Ns, r.ErrMaxNs = quantile(d, 0.99)-off, quantile(d, 1)-off
		r.diffs = nil
		if st := r.Steady; st != nil {
			st.ErrP50Ns, st.ErrP99Ns, st.ErrMaxNs = quantile(st.diffs, 0.5)-off, quantile(st.diffs, 0.99)-off, quantile(st.diffs, 1)-off
			st.diffs = nil
		}
		var why []string
		if r.Canceled != "" {
			why = append(why, "cut short: "+r.Canceled)
		}
		if r.Errors > 0 {
			why = append(why, fmt.Sprintf("%d failed requests", r.Errors))
		}
		if r.Unmatched > 0 {
			why = append(why, fmt.Sprintf("%d unmatched events", r.Unmatched))
		}
		if r.TokenMismatches > 0 {
			why = append(why, fmt.Sprintf("%d events with other token counts on the two sides", r.TokenMismatches))
		}
		if r.Matched == 0 {
			why = append(why, "no event matched")
		}
		if r.ErrP99Ns > int64(maxErr) {
			why = append(why, fmt.Sprintf("p99 error %s > %s", fmtNs(r.ErrP99Ns), fmtNs(int64(maxErr))))
		}
		r.Pass, r.Why = len(why) == 0, strings.Join(why, "; ")
		if !r.Pass || r.Step.Kind == KindProbe {
			continue
		}
		best := &rep.Faithful
		if r.Step.Kind == KindRate {
			best = &rep.FaithfulRate
		}
		if *best == nil || load(r.Step) > load((*best).Step) {
			*best = r
		}
	}
	rep.Verdict = rep.verdict(maxErr)
}

// load orders steps of one kind.
func load(s Step) float64 {
	if s.Kind == KindRate {
		return s.Rate
	}
	return s.EventsPerS
}

func (rep *Report) verdict(maxErr time.Duration) string {
	var parts []string
	if f := rep.Faithful; f != nil {
		parts = append(parts, fmt.Sprintf("this machine can drive %d streams / %.0f events/s faithfully (p99 error %s <= %s)",
			f.Step.Streams, f.EventsPerS, fmtNs(f.ErrP99Ns), fmtNs(int64(maxErr))))
	}
	if f := rep.FaithfulRate; f != nil {
		parts = append(parts, fmt.Sprintf("it can send %s requests/s faithfully (dispatch lag p99 %s, p99 error %s)",
			fmtRate(f.Step.Rate), fmtNs(f.LagP99Ns), fmtNs(f.ErrP99Ns)))
	}
	for _, r := range rep.Steps {
		if !r.Pass && r.Step.Kind != KindProbe {
			parts = append(parts, fmt.Sprintf("%s did not pass (%s)", r.Name, r.Why))
		}
	}
	if rep.Faithful == nil && rep.FaithfulRate == nil {
		parts = append([]string{fmt.Sprintf("no step stayed under a p99 error of %s: split the load over more client processes (replay --shard i/n)", fmtNs(int64(maxErr)))}, parts...)
	}
	return strings.Join(parts, "\n")
}

// WriteText prints the report as a table.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "tracekit calibrate: %s\n", rep.Note)
	if len(rep.OffsetsNs) > 0 {
		modes := make([]string, 0, len(rep.OffsetsNs))
		for m := range rep.OffsetsNs {
			modes = append(modes, m)
		}
		slices.Sort(modes)
		var parts []string
		for _, m := range modes {
			parts = append(parts, fmt.Sprintf("%s %s", m, fmtNs(rep.OffsetsNs[m])))
		}
		fmt.Fprintf(w, "offset removed per %s: %s (%s)\n\n", rep.offsetsOf(), strings.Join(parts, ", "), rep.Offset)
	} else {
		fmt.Fprintf(w, "offset removed: %s (%s)\n\n", fmtNs(rep.OffsetNs), rep.Offset)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tendpoint\tjoin\trequests\tevents/s\tlag p50\tp99\tmax\terror p50\tp99\tmax\tttft infl p50\tstamps\tclient cores\tclient RSS\tmock cores\tmatched\tunmatched\terrors\tpass\t")
	for _, r := range rep.Steps {
		mc := "-"
		if r.MockCores > 0 {
			mc = fmt.Sprintf("%.2f", r.MockCores)
		}
		pass := "yes"
		if !r.Pass {
			pass = "NO"
		}
		stamps := r.StampMode
		if stamps == "" {
			stamps = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f MiB\t%s\t%d\t%d\t%d\t%s\t\n",
			r.Name, r.Endpoint, r.Join, r.Requests, r.EventsPerS, fmtNs(r.LagP50Ns), fmtNs(r.LagP99Ns), fmtNs(r.LagMaxNs),
			fmtNs(r.ErrP50Ns), fmtNs(r.ErrP99Ns), fmtNs(r.ErrMaxNs), fmtNs(r.TTFTInflP50Ns), stamps, r.ClientCores, float64(r.ClientRSSBytes)/(1<<20),
			mc, r.Matched, r.Unmatched, r.Errors, pass)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := rep.writeSteady(w); err != nil {
		return err
	}
	if err := rep.writeNotes(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", rep.Verdict)
	return err
}

// offsetsOf says what the offsets are kept per: stamp mode, endpoint or
// both.
func (rep *Report) offsetsOf() string {
	var eps, modes bool
	for _, r := range rep.Steps {
		eps, modes = eps || r.Step.Endpoint != "", modes || r.Step.Stamp != ""
	}
	switch {
	case eps && modes:
		return "endpoint and stamp mode"
	case eps:
		return "endpoint"
	}
	return "stamp mode"
}

// writeSteady prints the steady-state error of the stream steps that
// have a window, as a second table.
func (rep *Report) writeSteady(w io.Writer) error {
	var rows []Result
	for _, r := range rep.Steps {
		if r.Steady != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nsteady state (events written while every stream of the step is open, but 1 in 100 stragglers; the ramp and the tail left out; not part of pass):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\twindow from\tlength\tevents\tof matched\terror p50\tp99\tmax\twhole-step p99\tclient cores\tclient CPU per event\t")
	for _, r := range rows {
		st := r.Steady
		cores, per := "-", "-"
		if st.ClientCPUPerEventNs > 0 {
			cores, per = fmt.Sprintf("%.2f", st.ClientCores), fmtNs(int64(math.Round(st.ClientCPUPerEventNs)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f%%\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, fmtNs(st.StartNs), fmtNs(st.WindowNs), st.Events,
			100*float64(st.Events)/float64(max(1, r.Matched)), fmtNs(st.ErrP50Ns), fmtNs(st.ErrP99Ns), fmtNs(st.ErrMaxNs), fmtNs(r.ErrP99Ns), cores, per)
	}
	return tw.Flush()
}

// writeNotes lists what the variations did: scrapes, burners, live views
// and stamp modes that fell back.
func (rep *Report) writeNotes(w io.Writer) error {
	var notes []string
	for _, r := range rep.Steps {
		if r.Step.Scrape {
			notes = append(notes, fmt.Sprintf("%s: %d scrapes of the mock's /metrics (%d failed)", r.Name, r.Scrapes, r.ScrapeFailures))
		}
		if r.Step.Burner {
			notes = append(notes, fmt.Sprintf("%s: %d burner goroutines spun beside the client (%v slices between yields)", r.Name, r.Burners, BurnSlice))
		}
		if r.Step.LiveView == "on" {
			notes = append(notes, fmt.Sprintf("%s: the live view took %d records from the recorder's tap (%d dropped)", r.Name, r.LiveSamples, r.LiveDropped))
		}
		if r.StampNote != "" {
			notes = append(notes, fmt.Sprintf("%s: stamps %s: %s", r.Name, r.StampMode, r.StampNote))
		}
	}
	if len(notes) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	return err
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// fmtNs prints ns in the unit that keeps three significant digits.
func fmtNs(ns int64) string {
	a := ns
	if a < 0 {
		a = -a
	}
	switch {
	case a < 1000:
		return fmt.Sprintf("%dns", ns)
	case a < 1000_000:
		return fmt.Sprintf("%.1fus", float64(ns)/1e3)
	case a < 1000_000_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}
