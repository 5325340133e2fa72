package analyze

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EventTokens is the distribution of output tokens per decode event of
// the stream: over the successful streamed requests, every content event
// (one carrying tokens) after a request's first, which holds the token
// prefill produced. A server decoding one token per step sends 1 per
// event; speculative decoding sends its accepted tokens plus one per step,
// so the mean is the acceptance length as the client sees it. Exact says
// every counted request carried the server's per-chunk usage (else the
// counts come from tokenizing the text). Nil in a Summary without decode
// events.
type EventTokens struct {
	Events int64 `json:"events"` // decode events counted
	Tokens int64 `json:"tokens"` // output tokens they carried
	// Mean is Tokens / Events; Max the most tokens one event carried.
	Mean float64 `json:"mean"`
	Max  int32   `json:"max"`
	// Percentiles are of the tokens per event (Options.Percentiles, and
	// the median as p50), from Counts exactly: the smallest count whose
	// events reach the share.
	Percentiles []ValuePct `json:"percentiles"`
	// Counts are the events by the tokens they carried, ascending.
	Counts []EventTokenCount `json:"counts"`
	// Exact: every counted request's tokens came from the server's usage.
	Exact bool `json:"exact"`
}

// EventTokenCount is how many decode events carried Tokens tokens.
type EventTokenCount struct {
	Tokens int32 `json:"tokens"` // tokens carried
	Events int64 `json:"events"` // decode events that carried that many
}

// eventTokenCounts accumulates decode events by their token count: the
// usual small counts in an array (a map update per event cost more than
// the rest of the per-event work), larger ones in a map.
type eventTokenCounts struct {
	small    [64]int64
	byTokens map[int32]int64
	inexact  bool
}

// add counts the decode events of one successful streamed request; ones
// says every event after the first carried one token (oneTokenEach).
func (c *eventTokenCounts) add(toks []int32, exact, ones bool) {
	if ones { // the decode events are those after the first content one
		k := int64(len(toks) - 1)
		if len(toks) > 0 && toks[0] <= 0 {
			k--
		}
		if k > 0 {
			c.small[1] += k
			c.inexact = c.inexact || !exact
		}
		return
	}
	seen := false
	for _, n := range toks {
		if n <= 0 {
			continue
		}
		if seen {
			if int(n) < len(c.small) {
				c.small[n]++
			} else {
				if c.byTokens == nil {
					c.byTokens = map[int32]int64{}
				}
				c.byTokens[n]++
			}
			c.inexact = c.inexact || !exact
		}
		seen = true
	}
}

// summary is the distribution, nil without a decode event.
func (c *eventTokenCounts) summary(ps []float64) *EventTokens {
	for n, k := range c.small {
		if k > 0 {
			if c.byTokens == nil {
				c.byTokens = map[int32]int64{}
			}
			c.byTokens[int32(n)] += k
			c.small[n] = 0
		}
	}
	if len(c.byTokens) == 0 {
		return nil
	}
	e := &EventTokens{Exact: !c.inexact}
	for _, n := range slices.Sorted(maps.Keys(c.byTokens)) {
		k := c.byTokens[n]
		e.Counts = append(e.Counts, EventTokenCount{Tokens: n, Events: k})
		e.Events += k
		e.Tokens += int64(n) * k
		e.Max = n
	}
	e.Mean = float64(e.Tokens) / float64(e.Events)
	if !slices.Contains(ps, 50) {
		ps = append([]float64{50}, ps...)
	}
	for _, p := range ps {
		e.Percentiles = append(e.Percentiles, ValuePct{P: p, Value: float64(e.percentile(p))})
	}
	return e
}

// percentile is the smallest token count whose events, with those of
// the smaller counts, reach p% of all events.
func (e *EventTokens) percentile(p float64) int32 {
	var cum int64
	for _, c := range e.Counts {
		cum += c.Events
		if float64(cum) >= p/100*float64(e.Events) {
			return c.Tokens
		}
	}
	return e.Max
}

// shares formats the share of events per token count: "1: 40.0%, 2: ...".
func (e *EventTokens) shares() string {
	parts := make([]string, len(e.Counts))
	for i, c := range e.Counts {
		parts[i] = fmt.Sprintf("%d: %.1f%%", c.Tokens, 100*float64(c.Events)/float64(e.Events))
	}
	return strings.Join(parts, ", ")
}

// source says where the token counts came from.
func (e *EventTokens) source() string {
	if e.Exact {
		return "the server's per-chunk usage"
	}
	return "the text, tokenized"
}

// writeEventTokens prints the distribution (nothing without one).
func (s *Summary) writeEventTokens(b *bufio.Writer) {
	e := s.TokensPerEvent
	if e == nil {
		return
	}
	fmt.Fprintf(b, "%-40s %.3f mean, %d max over %d events (counts from %s)\n", "Tokens per decode event:", e.Mean, e.Max, e.Events, e.source())
	fmt.Fprintf(b, "%-40s %s\n", "Decode events by tokens carried:", e.shares())
}

// writeEventTokensHTML writes the distribution as a table of counts.
func (s *Summary) writeEventTokensHTML(b *strings.Builder) {
	e := s.TokensPerEvent
	if e == nil {
		return
	}
	fmt.Fprintf(b, "<h3 id=\"tokens-per-event\">Tokens per decode event</h3>\n<p>%.3f mean, %d max over %d events (counts from %s).</p>\n",
		e.Mean, e.Max, e.Events, e.source())
	b.WriteString("<table class=\"figures\">\n<tr><th>tokens</th><th>events</th><th>share</th></tr>\n")
	for _, c := range e.Counts {
		fmt.Fprintf(b, "<tr><td>%d</td><td>%d</td><td>%.1f%%</td></tr>\n", c.Tokens, c.Events, 100*float64(c.Events)/float64(e.Events))
	}
	b.WriteString("</table>\n")
}
