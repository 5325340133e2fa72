package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
)

// mockTimeout bounds a child mock's start and stop.
const mockTimeout = 60 * time.Second

// runningMock is a mock serving one step.
type runningMock interface {
	URL() string
	// Stop ends the mock and returns its complete ground-truth log, its
	// own counters, and the CPU seconds it used (0 when not separable from
	// this process).
	Stop() ([]mock.LogEntry, mock.Stats, float64, error)
}

// inProcessMock is mock.Start in this process.
type inProcessMock struct{ srv *mock.Server }

var _ runningMock = inProcessMock{}

func startInProcess(cfg mock.Config) (runningMock, error) {
	cfg.KeepLog = true
	srv, err := mock.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the in-process mock: %w", err)
	}
	return inProcessMock{srv}, nil
}

func (m inProcessMock) URL() string { return m.srv.URL() }

func (m inProcessMock) Stop() ([]mock.LogEntry, mock.Stats, float64, error) {
	err := m.srv.Close()
	return m.srv.Log(), m.srv.Stats(), 0, err
}

// childMock is a `tracekit mock` child process. Its protocol is the mock
// command's: once serving it writes its --ready-file (JSON with its URL,
// atomically), and on SIGTERM completes its --emit-log file and exits.
type childMock struct {
	cmd     *exec.Cmd
	url     string
	logPath string
	stderr  *tailBuffer
	drained chan struct{} // closed when stdout hits EOF: the child is exiting
}

var _ runningMock = (*childMock)(nil)

// readyPoll is how often startChild looks for the child's ready file.
const readyPoll = 10 * time.Millisecond

// startChild writes cfg as the child's --config next to logPath and starts
// command with it, waiting (bounded) for its ready file.
func startChild(command, env []string, cfg mock.Config, logPath string) (runningMock, error) {
	base := strings.TrimSuffix(logPath, ".parquet")
	cfgPath, readyPath := base+".json", base+".ready.json"
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the mock config: %w", err)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("writing the mock config: %w", err)
	}
	if err := os.Remove(readyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing a stale mock ready file: %w", err)
	}
	args := append(append([]string(nil), command[1:]...), "--listen", "127.0.0.1:0", "--config", cfgPath, "--emit-log", logPath, "--ready-file", readyPath)
	c := exec.Command(command[0], args...)
	c.Env = append(os.Environ(), env...)
	m := &childMock{cmd: c, logPath: logPath, stderr: &tailBuffer{max: 4096}, drained: make(chan struct{})}
	c.Stderr = m.stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the mock child: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("starting the mock child %s: %w", command[0], err)
	}
	go func() { // owned by m: ends at the child's stdout EOF
		defer close(m.drained)
		io.Copy(io.Discard, out)
	}()
	deadline := time.NewTimer(mockTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		r, err := mock.ReadReadyFile(readyPath)
		if err == nil {
			m.url = r.URL
			return m, nil
		}
		if !errors.Is(err, fs.ErrNotExist) { // written atomically: never seen half-written
			c.Process.Kill()
			<-m.drained
			c.Wait()
			return nil, fmt.Errorf("the mock child's ready file: %w", err)
		}
		select {
		case <-m.drained:
			c.Wait()
			return nil, fmt.Errorf("the mock child exited before serving: %s", m.stderr)
		case <-deadline.C:
			c.Process.Kill()
			<-m.drained
			c.Wait()
			return nil, fmt.Errorf("the mock child wrote no ready file %s within %v: %s", readyPath, mockTimeout, m.stderr)
		case <-tick.C:
		}
	}
}

func (m *childMock) URL() string { return m.url }

func (m *childMock) Stop() ([]mock.LogEntry, mock.Stats, float64, error) {
	var st mock.Stats
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, st, 0, fmt.Errorf("stopping the mock child: %w", err)
	}
	select {
	case <-m.drained:
	case <-time.After(mockTimeout):
		m.cmd.Process.Kill()
		<-m.drained
		m.cmd.Wait()
		return nil, st, 0, fmt.Errorf("the mock child did not stop within %v of SIGTERM: %s", mockTimeout, m.stderr)
	}
	werr := m.cmd.Wait()
	cpu := 0.0
	if ps := m.cmd.ProcessState; ps != nil {
		cpu = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	if werr != nil {
		return nil, st, cpu, fmt.Errorf("the mock child failed: %w: %s", werr, m.stderr)
	}
	log, meta, err := mock.ReadLog(m.logPath)
	if err != nil {
		return nil, st, cpu, fmt.Errorf("reading the mock child's log: %w", err)
	}
	if meta.Stats != nil {
		st = *meta.Stats
	}
	return log, st, cpu, nil
}

// tailBuffer keeps the last max bytes written to it (a child's stderr, for
// error messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return "(no stderr)"
	}
	return strings.TrimSpace(string(t.b))
}

// waitForLog polls path until it is a complete mock log (a remote mock
// writes the footer when it stops) or wait passes.
func waitForLog(ctx context.Context, path string, wait time.Duration, logf func(string, ...any)) ([]mock.LogEntry, error) {
	deadline := time.Now().Add(wait)
	told := false
	for {
		log, _, err := mock.ReadLog(path)
		if err == nil {
			return log, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the mock's log %s was not readable within %v (stop the mock so it completes the file): %w", path, wait, err)
		}
		if !told {
			logf("waiting up to %v for the mock's log %s: stop the mock (Ctrl-C) so it completes it", wait, path)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
