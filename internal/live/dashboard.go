package live

import (
	"fmt"
	"io"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// Model is the terminal dashboard's bubbletea model: it shows the latest
// Snapshot and asks for a new one every Every.
type Model struct {
	view  *View
	every time.Duration
	snap  Snapshot
}

// NewModel is the dashboard of v, refreshed every every (0: 500 ms).
func NewModel(v *View, every time.Duration) Model {
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	return Model{view: v, every: every, snap: v.Snapshot()}
}

type tickMsg struct{}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.every, func(time.Time) tea.Msg { return tickMsg{} })
}

// Init starts the refresh.
func (m Model) Init() tea.Cmd { return m.tick() }

// Update takes a fresh snapshot on every tick; the run, not a key, ends
// the dashboard (Ctrl-C reaches the command's own signal handling).
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(tickMsg); ok {
		m.snap = m.view.Snapshot()
		return m, m.tick()
	}
	return m, nil
}

var (
	titleStyle = lipgloss.NewStyle().Bold(true)
	headStyle  = lipgloss.NewStyle().Faint(true)
	badStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	boxStyle   = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1)
)

// View renders the latest snapshot.
func (m Model) View() string { return Render(m.snap) }

// Render draws s as the dashboard's text.
func Render(s Snapshot) string {
	var b strings.Builder
	title := "tracekit"
	if s.Label != "" {
		title += " " + s.Label
	}
	if s.Finished {
		title += " (finished)"
	}
	b.WriteString(titleStyle.Render(title) + "\n")
	total := "?"
	if s.Total > 0 {
		total = fmt.Sprint(s.Total)
	}
	fmt.Fprintf(&b, "done %d/%s  in flight %d  ", s.Done, total, s.InFlight)
	failed := fmt.Sprintf("failed %d", s.Failed)
	if s.Failed > 0 {
		failed = badStyle.Render(failed)
	}
	b.WriteString(failed)
	fmt.Fprintf(&b, "  elapsed %s\n", (time.Duration(s.ElapsedS * float64(time.Second))).Truncate(time.Second))
	if ks := s.Kinds(); len(ks) > 0 {
		parts := make([]string, len(ks))
		for i, k := range ks {
			parts[i] = fmt.Sprintf("%s %d", k, s.FailedByKind[k])
		}
		b.WriteString(badStyle.Render("failures: "+strings.Join(parts, ", ")) + "\n")
	}
	fmt.Fprintf(&b, "\n%s\n", headStyle.Render(fmt.Sprintf("last %s: %d done, %d failed", time.Duration(s.WindowS*float64(time.Second)), s.WindowDone, s.WindowFailed)))
	fmt.Fprintf(&b, "%-6s %10s %10s %10s %8s\n", "", "p50 ms", "p90 ms", "p99 ms", "n")
	for _, r := range []struct {
		name string
		p    Percentiles
	}{{"TTFT", s.TTFT}, {"ITL", s.ITL}, {"E2EL", s.E2EL}} {
		if r.p.N == 0 {
			fmt.Fprintf(&b, "%-6s %10s %10s %10s %8d\n", r.name, "-", "-", "-", 0)
			continue
		}
		fmt.Fprintf(&b, "%-6s %10.1f %10.1f %10.1f %8d\n", r.name, r.p.P50Ms, r.p.P90Ms, r.p.P99Ms, r.p.N)
	}
	fmt.Fprintf(&b, "throughput %.1f req/s, %.0f output tok/s\n", s.RequestsPerS, s.OutputTokPerS)
	if h := s.Health; h.Cores > 0 { // a proxy (capture) sends nothing: no client health
		fmt.Fprintf(&b, "\n%s\n", headStyle.Render("client health (since start)"))
		fmt.Fprintf(&b, "dispatch lag p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", h.DispatchLagP50Ms, h.DispatchLagP99Ms, h.DispatchLagMaxMs)
		fmt.Fprintf(&b, "scheduler latency p99 %.2f ms  CPU %.0f%% (of %d cores)\n", h.SchedLatP99Ms, h.CPUPercent, h.Cores)
	}
	if s.Dropped > 0 {
		b.WriteString(badStyle.Render(fmt.Sprintf("live view behind: %d samples dropped (the recording is complete)", s.Dropped)) + "\n")
	}
	if len(s.Server) > 0 {
		fmt.Fprintf(&b, "\n%s\n", headStyle.Render("server telemetry"))
		for _, g := range s.Server {
			fmt.Fprintf(&b, "%s %g", g.Name, g.Value)
			if g.Note != "" {
				b.WriteString("  " + g.Note)
			}
			b.WriteString("\n")
		}
	}
	return boxStyle.Render(strings.TrimRight(b.String(), "\n")) + "\n"
}

// Dashboard runs the model as a bubbletea program writing to out (a
// terminal) until the returned stop is called; stop prints the last
// snapshot so it stays on screen. Input is not read: Ctrl-C is the
// command's signal, not a key.
func Dashboard(v *View, out io.Writer, opts ...tea.ProgramOption) (stop func()) {
	opts = append([]tea.ProgramOption{tea.WithOutput(out), tea.WithInput(nil), tea.WithoutSignalHandler(), tea.WithoutCatchPanics()}, opts...)
	p := tea.NewProgram(NewModel(v, 0), opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run() //nolint:errcheck // a terminal that fails leaves the recording alone
	}()
	return func() {
		p.Quit()
		<-done
		v.Finish()
		fmt.Fprint(out, Render(v.Snapshot()))
	}
}
