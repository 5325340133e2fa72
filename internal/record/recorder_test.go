package record

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// TestMain lets the SIGKILL test re-exec this binary as a recording child.
func TestMain(m *testing.M) {
	if path := os.Getenv("TRACEKIT_RECORDER_CHILD"); path != "" {
		recordingChild(path)
		return
	}
	os.Exit(m.Run())
}

// recordingChild submits numbered records forever, printing each number
// after Submit returns, until it is killed.
func recordingChild(path string) {
	r, err := NewRecorder(path, trace.RunMeta{Command: "child"}, RecorderOptions{Queue: 8, SyncEvery: 100 * time.Millisecond})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		rec := testRecord(i)
		r.Submit(&rec)
		fmt.Fprintln(out, i)
		out.Flush()
		time.Sleep(time.Millisecond)
	}
}

// testRecord is a record whose every field derives from i.
func testRecord(i int) trace.Record {
	n := i % 7
	r := trace.Record{
		RequestID: fmt.Sprintf("req-%d", i), ConversationID: fmt.Sprintf("conv-%d", i/3), Turn: int32(i % 3),
		Shard: 1, Attempt: int32(i % 2), Warmup: i%5 == 0, Target: "http://127.0.0.1:1",
		IntendedNs: int64(i) * 1000, SlotNs: int64(i)*1000 + 1, SentNs: int64(i)*1000 + 2, HeadersNs: int64(i)*1000 + 3, DoneNs: int64(i)*1000 + 900,
		Status: 200, InputTokens: int32(i), MaxTokens: 64, PromptTokens: int32(i), CompletionTokens: int32(n), CachedTokens: -1,
		TokensExact: i%2 == 0,
	}
	if i%11 == 3 {
		r.ErrorKind, r.ErrorMessage = trace.ErrMalformed, "event 2: server error: \"quoted\"\nnewline ünïcode"
	}
	for k := range n {
		r.EventNs = append(r.EventNs, int64(i)*1000+10+int64(k)*100)
		r.EventTokens = append(r.EventTokens, int32(k+1))
	}
	return r
}

func readAll(t *testing.T, path string) ([]trace.Record, trace.RunMeta) {
	t.Helper()
	recs, meta, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs, meta
}

// sameRecord compares a record read back from a recording with its
// source, whose event times are compared as the recording keeps them
// (trace.Record.RoundEvents); Parquet reads empty lists back as nil, so
// lengths and values are compared.
func sameRecord(a, b trace.Record) bool {
	b.EventNs = slices.Clone(b.EventNs)
	b.RoundEvents()
	la, lb := a, b
	la.EventNs, la.EventTokens, lb.EventNs, lb.EventTokens = nil, nil, nil, nil
	la.Parents, lb.Parents, la.After, lb.After = nil, nil, nil, nil // a file reads an empty list as [], a journal as nil
	return reflect.DeepEqual(la, lb) && fmt.Sprint(a.EventNs) == fmt.Sprint(b.EventNs) && fmt.Sprint(a.EventTokens) == fmt.Sprint(b.EventTokens) &&
		fmt.Sprint(a.Parents) == fmt.Sprint(b.Parents) && fmt.Sprint(a.After) == fmt.Sprint(b.After)
}

func checkRecords(t *testing.T, got []trace.Record, want map[string]trace.Record) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range got {
		w, ok := want[g.RequestID]
		if !ok {
			t.Fatalf("unexpected record %q", g.RequestID)
		}
		if seen[g.RequestID] {
			t.Fatalf("record %q twice", g.RequestID)
		}
		seen[g.RequestID] = true
		if !sameRecord(g, w) {
			t.Fatalf("record %q read back as\n%+v\nwant\n%+v", g.RequestID, g, w)
		}
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.parquet")
	r, err := NewRecorder(path, trace.RunMeta{Command: "test", Targets: []string{"a"}}, RecorderOptions{Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	const workers, per = 8, 1200 // > trace.RowGroupRows in total: several row groups
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var rec trace.Record // reused: Submit must copy
			for k := range per {
				src := testRecord(w*per + k)
				rec.EventNs, rec.EventTokens = append(rec.EventNs[:0], src.EventNs...), append(rec.EventTokens[:0], src.EventTokens...)
				ev, tok := rec.EventNs, rec.EventTokens
				rec = src
				rec.EventNs, rec.EventTokens = ev, tok
				r.Submit(&rec)
				for i := range rec.EventNs { // scribble: must not reach the file
					rec.EventNs[i] = -1
				}
			}
		})
	}
	wg.Wait()
	r.SetRunMeta(trace.RunMeta{Command: "test", Health: &trace.Health{DispatchLagP99Ns: 42}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	late := testRecord(0)
	r.Submit(&late)
	st := r.Stats()
	if st.Submitted != workers*per || st.Written != workers*per || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	got, meta := readAll(t, path)
	if len(got) != workers*per {
		t.Fatalf("read %d records, want %d", len(got), workers*per)
	}
	want := map[string]trace.Record{}
	for i := range workers * per {
		rec := testRecord(i)
		want[rec.RequestID] = rec
	}
	checkRecords(t, got, want)
	if meta.Health == nil || meta.Health.DispatchLagP99Ns != 42 {
		t.Fatalf("run meta %+v: SetRunMeta lost", meta)
	}
	for _, leftover := range []string{JournalPath(path), partialPath(path)} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Fatalf("%s left behind (%v)", leftover, err)
		}
	}
}

// TestRecoverAfterSIGKILL kills a real recording process and recovers what
// it left: every record its journal held before the kill must be there,
// intact, and none that was never submitted.
func TestRecoverAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "killed.parquet")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRACEKIT_RECORDER_CHILD="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan int, 1024)
	go func() { // owner: ends when the child's stdout closes
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				lines <- n
			} else {
				t.Errorf("child: %s", sc.Text())
			}
		}
	}()
	// Let it record for a while, note how far it got, wait until the
	// journal holds that much, then kill it.
	last := -1
	deadline := time.After(20 * time.Second)
	for last < 200 {
		select {
		case n, ok := <-lines:
			if !ok {
				t.Fatal("child exited early")
			}
			last = n
		case <-deadline:
			t.Fatalf("child submitted only %d records in 20 s", last+1)
		}
	}
	durable := last
	// Kill once the journal holds every record submitted so far: what the
	// journal holds survives SIGKILL; a fixed sleep of a few sync periods
	// is not enough on a loaded machine.
	for deadline := time.Now().Add(30 * time.Second); journalRecords(JournalPath(path)) < durable+1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the journal holds %d of the %d records submitted", journalRecords(JournalPath(path)), durable+1)
		}
	}
	// While the child lives its journal is locked: recover leaves it
	// alone and names the child.
	var le *LockedError
	if _, err := RecoverAll(path, ""); !errors.As(err, &le) || le.PID != cmd.Process.Pid {
		t.Fatalf("recovering a live run's journal: %v, want it refused naming pid %d", err, cmd.Process.Pid)
	}
	if n := journalRecords(JournalPath(path)); n < durable+1 {
		t.Fatalf("the refused recovery touched the live journal: %d records left", n)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for n := range lines {
		last = n
	}
	if _, err := trace.OpenRecording(partialPath(path)); err == nil {
		t.Fatal("the killed run's partial Parquet file is readable: the test did not kill mid-file")
	}
	res, err := RecoverAll(path, "") // the recording path finds its journal
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Out != path {
		t.Fatalf("results %+v", res)
	}
	got, meta := readAll(t, path)
	if meta.Command != "child" {
		t.Fatalf("run meta not recovered: %+v", meta)
	}
	if len(got) != res[0].Records || len(got) < durable+1 || len(got) > last+1 {
		t.Fatalf("recovered %d records (reported %d); %d were in the journal before the kill, %d submitted in all", len(got), res[0].Records, durable+1, last+1)
	}
	want := map[string]trace.Record{}
	for i := range last + 1 {
		rec := testRecord(i)
		want[rec.RequestID] = rec
	}
	checkRecords(t, got, want)
	for i := range durable + 1 {
		if got[i].RequestID != fmt.Sprintf("req-%d", i) {
			t.Fatalf("record %d is %q", i, got[i].RequestID)
		}
	}
	t.Logf("child submitted %d records, %d durable before the kill, %d recovered, %d torn bytes", last+1, durable+1, len(got), res[0].TornBytes)
	for _, leftover := range []string{JournalPath(path), partialPath(path), LockPath(path)} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Fatalf("%s left behind after recovery (%v)", leftover, err)
		}
	}
}

// TestNewRecorderRecoversLeftover: starting again over a killed run's
// journal finalizes it instead of truncating it.
func TestNewRecorderRecoversLeftover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "again.parquet")
	payload, _ := trace.AppendRunMetaPayload(nil, trace.RunMeta{Command: "first run"})
	j := trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	for i := range 3 {
		rec := testRecord(i)
		j = trace.AppendJournalFrame(j, trace.AppendRecordPayload(nil, &rec))
	}
	os.WriteFile(JournalPath(path), j, 0o644)
	r, err := NewRecorder(path, trace.RunMeta{Command: "second run"}, RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord(7)
	r.Submit(&rec)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	res := r.Recovered()
	if res == nil || res.Records != 3 {
		t.Fatalf("recovered %+v", res)
	}
	old, meta := readAll(t, res.Out)
	if len(old) != 3 || meta.Command != "first run" {
		t.Fatalf("old run: %d records, meta %+v", len(old), meta)
	}
	cur, meta := readAll(t, path)
	if len(cur) != 1 || meta.Command != "second run" {
		t.Fatalf("new run: %d records, meta %+v", len(cur), meta)
	}
}

func TestRecoverTornJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.parquet")
	r, err := NewRecorder(path, trace.RunMeta{Command: "torn"}, RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rec := testRecord(i)
		r.Submit(&rec)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Rebuild the journal a crash would have left, cut inside the last frame.
	var j []byte
	payload, _ := trace.AppendRunMetaPayload(nil, trace.RunMeta{Command: "torn"})
	j = trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	for i := range 10 {
		rec := testRecord(i)
		j = trace.AppendJournalFrame(j, trace.AppendRecordPayload(nil, &rec))
	}
	jpath := filepath.Join(dir, "crashed.parquet.journal")
	if err := os.WriteFile(jpath, j[:len(j)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := RecoverAll(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Records != 9 || res[0].TornBytes == 0 {
		t.Fatalf("results %+v, want 9 records and a torn tail", res)
	}
	got, _ := readAll(t, filepath.Join(dir, "crashed.parquet"))
	if len(got) != 9 || !sameRecord(got[8], testRecord(8)) {
		t.Fatalf("recovered %d records", len(got))
	}
	// A corrupt byte inside an early frame ends the valid part there.
	j[len(trace.JournalMagic)+40] ^= 0xff
	os.WriteFile(jpath, j, 0o644)
	if n, err := Recover(jpath, filepath.Join(dir, "corrupt.parquet")); err != nil || n != 0 {
		t.Fatalf("corrupt first frame: %d records, %v", n, err)
	}
}

func TestRecoverBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "x.journal")
	os.WriteFile(bad, []byte("PAR1 not a journal"), 0o644)
	_, err := Recover(bad, "")
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "not a tracekit journal") {
		t.Fatalf("error %v should name the file and say what was expected", err)
	}
	if _, err := Recover(filepath.Join(dir, "missing.parquet"), ""); err == nil {
		t.Fatal("missing file recovered")
	}
	if _, err := Recover(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "no *.journal") {
		t.Fatalf("empty dir: %v", err)
	}
}

// TestRecorderNoReplace: with NoReplace a taken path refuses to start, a
// file appearing at the path meanwhile is not replaced (the recording stays
// complete at its partial path), and without it the old behaviour holds.
func TestRecorderNoReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "taken.parquet")
	os.WriteFile(path, []byte("earlier run"), 0o644)
	if _, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{NoReplace: true}); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("NewRecorder over an existing file: %v; want an error naming it, wrapping fs.ErrExist", err)
	}
	os.WriteFile(JournalPath(filepath.Join(dir, "j.parquet")), []byte("x"), 0o644)
	if _, err := NewRecorder(filepath.Join(dir, "j.parquet"), trace.RunMeta{}, RecorderOptions{NoReplace: true}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("NewRecorder over a leftover journal: %v", err)
	}

	late := filepath.Join(dir, "late.parquet")
	r, err := NewRecorder(late, trace.RunMeta{}, RecorderOptions{NoReplace: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord(1)
	r.Submit(&rec)
	os.WriteFile(late, []byte("appeared meanwhile"), 0o644)
	if err := r.Close(); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), partialPath(late)) {
		t.Fatalf("Close with the path taken meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(late); string(b) != "appeared meanwhile" {
		t.Fatalf("the file that appeared was replaced: %q", b)
	}
	if got, _ := readAll(t, partialPath(late)); len(got) != 1 {
		t.Fatalf("partial holds %d records", len(got))
	}

	r, err = NewRecorder(path, trace.RunMeta{}, RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, path); len(got) != 0 {
		t.Fatalf("%d records", len(got))
	}
}

// TestRecoverNeverReplaces: recovering a journal whose output name is
// taken writes <name>.recovered.parquet, then .recovered-2, and leaves the
// existing files as they were.
func TestRecoverNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run.parquet")
	os.WriteFile(out, []byte("finished before the crash"), 0o644)
	payload, _ := trace.AppendRunMetaPayload(nil, trace.RunMeta{Command: "crashed"})
	j := trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	for i := range 2 {
		rec := testRecord(i)
		j = trace.AppendJournalFrame(j, trace.AppendRecordPayload(nil, &rec))
	}
	for _, want := range []string{"run.recovered.parquet", "run.recovered-2.parquet"} {
		os.WriteFile(JournalPath(out), j, 0o644)
		res, err := RecoverAll(JournalPath(out), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Out != filepath.Join(dir, want) || res[0].Records != 2 {
			t.Fatalf("results %+v, want 2 records in %s", res, want)
		}
		if got, _ := readAll(t, res[0].Out); len(got) != 2 {
			t.Fatalf("%s holds %d records", want, len(got))
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "finished before the crash" {
		t.Fatalf("recover replaced %s: %q", out, b)
	}
}

// journalRecords counts the intact records the journal at path holds now.
func journalRecords(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	jr, err := trace.NewJournalReader(f, path, trace.JournalMagic)
	if err != nil {
		return 0
	}
	var rec trace.Record
	n := 0
	for jr.Next(&rec) == nil {
		n++
	}
	return n
}
