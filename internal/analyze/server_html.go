package analyze

// serverCharts are the server's gauges on the client's time axis: the
// client's time-averaged requests in flight (1 s bins, as in the client's
// chart) with each target's running and waiting requests, and each
// target's KV-cache usage, over the same analysis window. None without a
// server section.
func (s *Summary) serverCharts() []chart {
	r := s.Server
	if r == nil || len(r.Targets) == 0 {
		return nil
	}
	colors := []string{colorA, colorB, colorC, "#9467bd", "#ff7f0e", "#8c564b"}
	color := func(i int) string { return colors[i%len(colors)] }
	pts := func(name, c string, ps []ServerPoint, scale float64) chartSeries {
		cs := chartSeries{name: name, color: c}
		for _, p := range ps {
			cs.pts = append(cs.pts, [2]float64{p.T, p.V * scale})
		}
		return cs
	}
	// Bin i of the client's series covers [i s, (i+1) s): drawn at its middle.
	client := chartSeries{name: "client: in flight (time-averaged)", color: "#7f7f7f"}
	for i, v := range s.Series.Concurrency {
		client.pts = append(client.pts, [2]float64{float64(i) + 0.5, v})
	}
	queue := chart{id: "server-requests", title: "Requests: client in flight, server running and waiting", xlabel: "time (s)", ylabel: "requests", series: []chartSeries{client}}
	kv := chart{id: "server-kv", title: "Server KV-cache usage", xlabel: "time (s)", ylabel: "%"}
	k := 0
	label := func(t *ServerTarget, what string) string {
		if len(r.Targets) == 1 {
			return what
		}
		return t.Target + " " + what
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		if len(t.Series.Running) > 0 {
			queue.series = append(queue.series, pts(label(t, "running"), color(k), t.Series.Running, 1))
			k++
		}
		if len(t.Series.Waiting) > 0 {
			queue.series = append(queue.series, pts(label(t, "waiting"), color(k), t.Series.Waiting, 1))
			k++
		}
		if len(t.Series.KVCacheUsage) > 0 {
			kv.series = append(kv.series, pts(label(t, "KV-cache usage"), color(i), t.Series.KVCacheUsage, 100))
		}
	}
	out := []chart{queue}
	if len(kv.series) > 0 {
		out = append(out, kv)
	}
	return out
}
