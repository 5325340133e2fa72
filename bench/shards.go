package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// shardSkew: cmd/tracekit's BenchmarkShardStartSkew, three shards on three
// simulated hosts (network namespaces joined to the mock's by veth links)
// started by one --start-at, every conversation at offset 0. It needs root
// and iproute2; without them the stage writes why instead of figures.
func shardSkew(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Shard start skew (cmd/tracekit.BenchmarkShardStartSkew, 3 simulated hosts, 10 rounds)"
	if why := netnsUnavailable(); why != "" {
		return []figure{{Section: sec, Name: "shard start skew", Value: "not measured: " + why,
			Note: "the benchmark creates network namespaces and veth links; run make bench as root with iproute2 to include it"}}, nil
	}
	rows, cmd, err := goBench(ctx, e, "./cmd/tracekit/", "ShardStartSkew", "-benchtime", "10x")
	if err != nil {
		return nil, err
	}
	r, ok := find(rows, "BenchmarkShardStartSkew")
	if !ok {
		return nil, fmt.Errorf("%s: no BenchmarkShardStartSkew row", cmd)
	}
	m := r.Metrics
	la := loadAvg()
	return []figure{
		{Section: sec, Name: "wake-up after --start-at (per shard)",
			Value:   fmt.Sprintf("p50 %.0f us, max %.0f us", m["wake-p50-us"], m["wake-max-us"]),
			Command: cmd,
			Note:    "RunMeta.Clock.StartLagNs: how late each shard's dispatcher woke for the instant; the namespaces share one kernel clock, so this is the barrier (conversion, wait, wake-up), not clock sync between real hosts; load average " + la},
		{Section: sec, Name: "shard start skew (spread of the shards' wake-ups in a round)",
			Value: fmt.Sprintf("p50 %.0f us, max %.0f us", m["skew-p50-us"], m["skew-max-us"]), Command: cmd},
		{Section: sec, Name: "first requests' lateness (slot - intended, offset 0)",
			Value:   fmt.Sprintf("p50 %.0f us, max %.0f us", m["first-late-p50-us"], m["first-late-max-us"]),
			Goal:    "conversation starts within 5 ms of their intended times across shards",
			Verdict: atMost(m["first-late-max-us"], 5000, us), Command: cmd,
			Note: "each shard reads its first trace batch before the barrier, so this is the wake-up and the dispatch alone; on a loaded 2-core machine the scheduler sets the max (load average " + la + ")"},
		{Section: sec, Name: "spread of the shards' first requests (wall clock, per round)",
			Value: fmt.Sprintf("p50 %.0f us, max %.0f us", m["first-skew-p50-us"], m["first-skew-max-us"]), Command: cmd},
	}, nil
}

// netnsUnavailable says why this process cannot make network namespaces,
// or "" when it can (it makes and removes one to find out).
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "`ip` (iproute2) is not installed"
	}
	ns := "tkbench-probe-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add failed: %v: %s", err, out)
	}
	exec.Command("ip", "netns", "del", ns).Run()
	return ""
}
