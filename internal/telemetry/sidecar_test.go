package telemetry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

func TestSidecarWritesAndReplaces(t *testing.T) {
	srv := mocktest.Start(t, nil)
	dir := t.TempDir()
	recPath := filepath.Join(dir, "run.parquet")
	o := SidecarOptions{Recording: recPath, Endpoints: []string{MetricsURL(srv.URL())}, Interval: 20 * time.Millisecond, Timeout: hangGuard}

	before := clock.Mono()
	sc, err := StartSidecar(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	completion(t, srv.URL())
	res, err := sc.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != trace.MetricsPath(recPath) || sc.Name() != "run.metrics.parquet" {
		t.Fatalf("path %s name %s", res.Path, sc.Name())
	}
	d, err := Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Meta.StartMonoNs < before || d.Meta.StartMonoNs > clock.Mono() || d.Meta.Recording != "run.parquet" {
		t.Fatalf("meta %+v: expected the scraper's own zero, taken in StartSidecar, and the recording's name", d.Meta)
	}
	if len(d.Scrapes) < 2 { // the first at once, the last by Finish
		t.Fatalf("%d scrapes", len(d.Scrapes))
	}
	if gen := d.Find("", "vllm:generation_tokens_total"); len(gen) != 1 || gen[0].Points[len(gen[0].Points)-1].Value == 0 {
		t.Fatalf("the last scrape (Finish's) does not show the completion's tokens: %+v", gen)
	}

	// Without Replace an existing sidecar is refused, before anything runs.
	if _, err := StartSidecar(context.Background(), o); !errors.Is(err, os.ErrExist) {
		t.Fatalf("existing sidecar: got %v, want os.ErrExist", err)
	}
	// With Replace the old file stays whole until the new one is complete.
	old, _ := os.ReadFile(res.Path)
	o.Replace = true
	sc2, err := StartSidecar(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(res.Path); string(now) != string(old) {
		t.Fatal("the old sidecar changed before the new one was complete")
	}
	if _, err := sc2.Finish(); err != nil {
		t.Fatal(err)
	}
	d2, err := Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Meta.StartMonoNs <= d.Meta.StartMonoNs {
		t.Fatal("the sidecar was not replaced")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left in the directory: %v", ents)
	}
}

func TestMetaSinkNamesAndDrops(t *testing.T) {
	mem := &record.Memory{}
	m := NewMetaSink(mem, "run.metrics.parquet")
	m.SetRunMeta(trace.RunMeta{Host: "h"})
	if got := mem.RunMeta(); got.Metrics != "run.metrics.parquet" || got.Host != "h" {
		t.Fatalf("forwarded %+v", got)
	}
	m.Drop()
	if got := mem.RunMeta(); got.Metrics != "" || got.Host != "h" {
		t.Fatalf("after Drop: %+v", got)
	}
	m.SetRunMeta(trace.RunMeta{Host: "h2"})
	if got := mem.RunMeta(); got.Metrics != "" {
		t.Fatalf("after Drop a later meta still names the sidecar: %+v", got)
	}
}
