package analyze

import (
	"slices"
	"sort"

	"github.com/tracekit/tracekit/trace"
)

// SessionStats are the session-level metrics of the graph conversations
// (agentic traffic: records with parents) of a recording, beside the
// request metrics (which, the vLLM block included, stay computed over
// requests). A session is one conversation; its graph is rebuilt from the
// records' parents (empty: the previous turn; trace.RootParent: the
// conversation start) and wait-only edges (after), without the trace. With several records of one
// turn (shards overlap, retries are separate ids), the last one counts.
//
//   - makespan: the session's last done_ns minus its first intended_ns;
//   - server time of a request: done_ns - sent_ns (0 for one not sent);
//     total server time: their sum over the session;
//   - critical path: the largest sum of server times along a chain of
//     dependencies (parents and wait-only edges, root to leaf), the time
//     the session needs if every branch ran in parallel with no delays;
//     critical/total near 1 is a sequential session, small a wide one;
//   - success: every request of the session succeeded (Options.Success);
//   - depth of a request: the longest chain of parents above it (0 for a
//     root; wait-only edges bring no history, so they add no depth);
//     per-depth TTFT over the successful streamed requests;
//   - tool calls and mismatches: the records' tool_calls and
//     tool_call_mismatch summed.
type SessionStats struct {
	Sessions    int     `json:"sessions"`
	Succeeded   int     `json:"succeeded"`
	SuccessRate float64 `json:"success_rate"`
	Requests    int     `json:"requests"`
	// ParentFailed counts requests not sent because a parent failed.
	ParentFailed       int `json:"parent_failed"`
	ToolCalls          int `json:"tool_calls"`
	ToolCallMismatches int `json:"tool_call_mismatches"`

	MakespanMs     SessionDist `json:"makespan_ms"`
	CriticalPathMs SessionDist `json:"critical_path_ms"`
	ServerTimeMs   SessionDist `json:"server_time_ms"`
	// CriticalOverServer is the mean over sessions of critical path /
	// total server time (sessions with server time).
	CriticalOverServer float64      `json:"critical_over_server"`
	ByDepth            []DepthStats `json:"per_depth"`
}

// SessionDist summarizes one figure over sessions.
type SessionDist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
}

// DepthStats is TTFT at one depth of the session graphs.
type DepthStats struct {
	Depth      int     `json:"depth"`
	Requests   int     `json:"requests"`
	Completed  int     `json:"completed"`
	MeanTTFTms float64 `json:"mean_ttft_ms"`
	P50TTFTms  float64 `json:"p50_ttft_ms"`
	P90TTFTms  float64 `json:"p90_ttft_ms"`
}

// sessions computes s.Sessions when a request of s carries parents; it
// leaves it nil for chat recordings.
func (s *Summary) sessions() {
	graph := false
	for i := range s.Reqs {
		if len(s.Reqs[i].Parents) > 0 || len(s.Reqs[i].After) > 0 {
			graph = true
			break
		}
	}
	if !graph {
		return
	}
	byConv := map[string][]*Request{}
	var order []string
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if _, ok := byConv[q.ConversationID]; !ok {
			order = append(order, q.ConversationID)
		}
		byConv[q.ConversationID] = append(byConv[q.ConversationID], q)
	}
	st := &SessionStats{}
	var makespans, crits, servers []float64
	var ratioSum float64
	var ratioN int
	depthTTFT := map[int][]float64{}
	depthReqs := map[int]int{}
	for _, id := range order {
		ss := sessionOf(byConv[id])
		st.Sessions++
		st.Requests += len(ss.reqs)
		if ss.ok {
			st.Succeeded++
		}
		makespans = append(makespans, float64(ss.makespan)/1e6)
		crits = append(crits, float64(ss.critical)/1e6)
		servers = append(servers, float64(ss.server)/1e6)
		if ss.server > 0 {
			ratioSum += float64(ss.critical) / float64(ss.server)
			ratioN++
		}
		for k, q := range ss.reqs {
			if q.ErrorKind == string(trace.ErrParentFailed) {
				st.ParentFailed++
			}
			st.ToolCalls += int(q.ToolCalls)
			if q.ToolCallMismatch {
				st.ToolCallMismatches++
			}
			d := ss.depth[k]
			depthReqs[d]++
			if q.Success && !q.NonStreaming {
				depthTTFT[d] = append(depthTTFT[d], float64(q.TTFTNs)/1e6)
			}
		}
	}
	st.SuccessRate = ratio(float64(st.Succeeded), float64(st.Sessions))
	st.MakespanMs, st.CriticalPathMs, st.ServerTimeMs = sessionDist(makespans), sessionDist(crits), sessionDist(servers)
	st.CriticalOverServer = ratio(ratioSum, float64(ratioN))
	var depths []int
	for d := range depthReqs {
		depths = append(depths, d)
	}
	sort.Ints(depths)
	for _, d := range depths {
		v := depthTTFT[d]
		ds := sessionDist(v)
		st.ByDepth = append(st.ByDepth, DepthStats{Depth: d, Requests: depthReqs[d], Completed: len(v),
			MeanTTFTms: ds.Mean, P50TTFTms: ds.P50, P90TTFTms: ds.P90})
	}
	s.Sessions = st
}

// session is one conversation's graph figures.
type session struct {
	reqs                       []*Request // one per turn, in turn order
	depth                      []int      // parallel to reqs
	makespan, critical, server int64
	ok                         bool
}

// sessionOf rebuilds one conversation's graph from its requests.
func sessionOf(all []*Request) session {
	byTurn := map[int32]*Request{}
	for _, q := range all {
		byTurn[q.Turn] = q // the last record of a turn
	}
	ss := session{ok: true}
	for _, q := range byTurn {
		ss.reqs = append(ss.reqs, q)
	}
	slices.SortFunc(ss.reqs, func(a, b *Request) int { return int(a.Turn) - int(b.Turn) })
	idx := make(map[int32]int, len(ss.reqs))
	for k, q := range ss.reqs {
		idx[q.Turn] = k
	}
	ss.depth = make([]int, len(ss.reqs))
	path := make([]int64, len(ss.reqs)) // the critical path ending at each request
	first, last := int64(0), int64(0)
	for k, q := range ss.reqs {
		srv := max(q.DoneNs-q.SentNs, 0)
		if q.ErrorKind == string(trace.ErrParentFailed) {
			srv = 0
		}
		ss.server += srv
		ss.ok = ss.ok && q.Success
		if k == 0 || q.IntendedNs < first {
			first = q.IntendedNs
		}
		last = max(last, q.DoneNs)
		parents := q.Parents
		if len(parents) == 0 && k > 0 {
			parents = []int32{ss.reqs[k-1].Turn} // a chat step: the previous turn
		}
		var before int64
		for _, p := range parents {
			j, found := idx[p]
			if p == trace.RootParent || !found || j >= k {
				continue
			}
			ss.depth[k] = max(ss.depth[k], ss.depth[j]+1)
			before = max(before, path[j])
		}
		for _, a := range q.After {
			if j, found := idx[a]; found && j < k {
				before = max(before, path[j])
			}
		}
		path[k] = before + srv
		ss.critical = max(ss.critical, path[k])
	}
	ss.makespan = last - first
	return ss
}

func sessionDist(v []float64) SessionDist {
	if len(v) == 0 {
		return SessionDist{}
	}
	v = slices.Clone(v)
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	return SessionDist{Mean: sum / float64(len(v)), P50: trace.Percentile(v, 50), P90: trace.Percentile(v, 90), Max: v[len(v)-1]}
}
