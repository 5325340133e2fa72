package trace

// The gap layout of the event times (column event_gap_ns, schema 6 on).
// Parquet's delta encoding packs each run of values by its widest delta;
// absolute times jump back by seconds at every request boundary, so nearly
// every run packed wide. Gaps restart near zero at each request. The
// conversion wraps like int64 arithmetic both ways, so it is lossless for
// any values (an event stamped before SentNs included).

// toGaps writes the on-disk form of ts (absolute times of a request sent
// at sent) into dst and returns it.
func toGaps(dst, ts []int64, sent int64) []int64 {
	prev := sent
	for _, t := range ts {
		dst = append(dst, t-prev)
		prev = t
	}
	return dst
}

// fromGaps turns gaps back into absolute times, in place.
func fromGaps(gaps []int64, sent int64) {
	t := sent
	for i, g := range gaps {
		t += g
		gaps[i] = t
	}
}

// gapRows returns rows with EventNs in the gap form for writing, leaving
// rows and their lists untouched: the rows with events are copied into
// *scratch and their gaps into *buf (both reused from call to call; the
// writer copies the values before returning).
func gapRows(rows []Record, scratch *[]Record, buf *[]int64) []Record {
	n := 0
	for i := range rows {
		n += len(rows[i].EventNs)
	}
	if n == 0 {
		return rows
	}
	out, gaps := (*scratch)[:0], (*buf)[:0]
	if cap(gaps) < n {
		gaps = make([]int64, 0, n)
	}
	for i := range rows {
		r := rows[i]
		if len(r.EventNs) > 0 {
			k := len(gaps)
			gaps = toGaps(gaps, r.EventNs, r.SentNs)
			r.EventNs = gaps[k:len(gaps):len(gaps)]
		}
		out = append(out, r)
	}
	*scratch, *buf = out[:0], gaps[:0]
	return out
}
