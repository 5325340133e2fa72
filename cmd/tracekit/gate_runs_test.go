package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// The gate on run sets, against the mock: sets of 3 runs from a mock and
// from one decoding twice as slow fail "e2el.median>+5%" with --beyond-ci
// (exit 1 naming it); sets of 3 runs from the same mock pass, over 20
// repetitions of the whole comparison with different trace and mock seeds
// (at most maxFalseAlarms of them may fail, the bound below).
//
// Why the bound holds whatever the noise: a run set's interval is
// mean ± t·s/√3 with t = t(0.975, 2) = 4.303, and no run of a set of 3
// lies further than s·2/√3 = 1.155·s from the set's mean, so intervals
// apart (B's lower end above A's upper end, what --beyond-ci needs) put
// every run of B above every run of A. The runs of A and B alternate
// against the same mock, so under no difference they are exchangeable,
// and all three of B above all three of A has probability 1/C(6,3) = 1/20
// at most, whatever the distribution of a run's figure (or a slow drift
// of the machine's load, which alternation shares between the sets). The
// +5% threshold only lowers it. The count of false alarms over 20
// independent repetitions is then at most Binomial(20, 1/20), and
// P(X >= 9) < 1e-6: allowing 8 can fail only on a gate that raises
// alarms far more often than its intervals allow (a gate that ignored
// them would fail every repetition: the same mock's runs differ by more
// than nothing, and half the time upwards).
func TestGateRunSetsAgainstMock(t *testing.T) {
	const (
		runs           = 3
		reps           = 20
		maxFalseAlarms = 8
		gate           = "e2el.median>+5%"
	)
	dir := t.TempDir()
	traceFor := func(seed, convs, outTokens int, rate string) string {
		tr := filepath.Join(dir, fmt.Sprintf("t%d.parquet", seed))
		if _, stderr, code := runCLI(t, "synth", "--conversations", fmt.Sprint(convs), "--turns", "1", "--input-tokens", "20", "--output-tokens", fmt.Sprint(outTokens),
			"--rate", rate, "--burstiness", "4", "--seed", fmt.Sprint(seed), "-o", tr); code != ExitOK {
			t.Fatalf("synth: exit %d: %s", code, stderr)
		}
		return tr
	}
	startMock := func(seed int64, decode time.Duration) *mock.Server {
		return mocktest.Start(t, func(c *mock.Config) {
			c.Seed = seed
			c.Latency.DecodeBase = mock.Duration(decode)
			c.Latency.JitterCV = 0.02
			c.KeepLog, c.KeepBodies = false, false
		})
	}
	// sets replays tr into the run sets a and b, their runs alternating.
	sets := func(tr string, a, b string, srvA, srvB *mock.Server) {
		for i := 1; i <= runs; i++ {
			for _, s := range []struct {
				out string
				srv *mock.Server
			}{{a, srvA}, {b, srvB}} {
				// Kernel stamps: the gate is what is tested here, and the
				// default mode starts an arrival observer process for each
				// of the 126 replays, half the test's time.
				if _, stderr, code := runCLI(t, "replay", tr, "--target", s.srv.URL(), "-o", analyze.RunPath(s.out, i),
					"--no-analyze", "--progress", "none", "--no-probe", "--ignore-eos", "--stamp", "kernel"); code != ExitOK {
					t.Fatalf("replay run %d of %s: exit %d: %s", i, s.out, code, stderr)
				}
			}
		}
	}

	// A request's end is due at its start + prefill + the sum of its
	// token times (the mock keeps that schedule when the machine stalls
	// it, catching up after), so the median end-to-end latency carries the
	// decode difference whole, where a loaded machine bunching events
	// moves the gaps themselves; requests spread over the run (not all at
	// once) keep a stall to a few of them, below the median.
	const decode = 20 * time.Millisecond
	tr := traceFor(1, 12, 16, "30")
	base, slow := filepath.Join(dir, "base.parquet"), filepath.Join(dir, "slow.parquet")
	// Twice as slow: a loaded machine's stalls widen a set's interval by
	// tens of percent (a run with one reaches the mean), never by 100%.
	sets(tr, base, slow, startMock(1, decode), startMock(1, 2*decode))
	stdout, stderr, code := runCLI(t, "compare", base, slow, "--fail-on", gate, "--beyond-ci")
	if code != ExitFailed || !strings.Contains(stderr, gate) {
		t.Fatalf("twice as slow decode: exit %d, stderr %q: want 1 naming %s\n%s", code, stderr, gate, stdout)
	}
	t.Logf("twice as slow decode:\n%s", stdout)

	if testing.Short() {
		t.Skip("the 20 repetitions take some seconds: not with -short")
	}
	falseAlarms := 0
	for rep := range reps {
		seed := 100 + rep
		srv := startMock(int64(seed), 5*time.Millisecond) // the bound holds at any speed: a fast mock keeps it cheap
		a, b := filepath.Join(dir, fmt.Sprintf("a%d.parquet", rep)), filepath.Join(dir, fmt.Sprintf("b%d.parquet", rep))
		sets(traceFor(seed, 5, 6, "0"), a, b, srv, srv)
		stdout, stderr, code := runCLI(t, "compare", a, b, "--fail-on", gate, "--beyond-ci")
		switch code {
		case ExitOK:
		case ExitFailed:
			falseAlarms++
			t.Logf("repetition %d (seed %d): a false alarm\n%s", rep, seed, stdout)
		default:
			t.Fatalf("repetition %d: exit %d: %s", rep, code, stderr)
		}
	}
	t.Logf("%d false alarms in %d repetitions", falseAlarms, reps)
	if falseAlarms > maxFalseAlarms {
		t.Errorf("%d false alarms in %d comparisons of the same mock: more than the intervals allow (%d)", falseAlarms, reps, maxFalseAlarms)
	}
}
