//go:build unix

package replay

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// BenchmarkReplayCPU replays 16 conversations of 36 turns (a question of
// about 600 bytes and a reference answer of about 1.5 KB a turn, as the
// bench's send-cpu stage) against an in-process mock, closed and open
// loop with the reference history, and reports the process's CPU per
// request (client and mock together; run with -cpuprofile to split them).
//
//	go test -run '^$' -bench ReplayCPU -benchtime 3x -cpuprofile cpu.prof ./internal/replay/
func BenchmarkReplayCPU(b *testing.B) {
	const convs, turns = 16, 36
	q := strings.Repeat("please explain the \"next\" step of the plan in detail.\n", 11)
	a := strings.Repeat("The next step is to measure, then to change one thing at a time. ", 23)
	var all [][]trace.Turn
	for c := range convs {
		id, start := fmt.Sprintf("c%03d", c), int64(c)*int64(time.Millisecond)
		var conv []trace.Turn
		for k := range turns {
			conv = append(conv, trace.Turn{ConversationID: id, Turn: int32(k), StartOffsetNs: start,
				ArrivalOffsetNs: start + int64(k)*int64(4*time.Millisecond), ThinkTimeNs: int64(time.Millisecond),
				Messages:        []trace.Message{{Role: "user", Content: fmt.Sprintf("%d: %s", k, q), Tokens: 120}},
				ReferenceAnswer: fmt.Sprintf("%d: %s", k, a), OutputTokens: 8})
		}
		all = append(all, conv)
	}
	path := writeTrace(b, all...)
	srv := mocktest.Start(b, nil)
	for _, timing := range []Timing{TimingClosed, TimingTrace} {
		b.Run(string(timing), func(b *testing.B) {
			var cpu time.Duration
			requests := 0
			for b.Loop() {
				c0 := processCPU()
				sink, _ := run(b, Config{Trace: path, Targets: []string{srv.URL()}, Timing: timing, History: HistoryReference,
					MaxConcurrency: 64, ContinuousUsage: "off", Model: "tracekit-mock"})
				cpu += processCPU() - c0
				requests += len(sink.Records())
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(requests), "cpu-us/request")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
