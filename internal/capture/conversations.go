package capture

import (
	"encoding/binary"
	"hash/maphash"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// conversations groups requests carrying a history (chat, Responses,
// Messages) into conversations, and agentic ones
// into dependency graphs, by their message history.
//
// Each finished turn registers its transcript: the hash of (its messages +
// its answer, tool calls included), and the hash of its answer message
// alone. A new request hashes each of its messages once (mh) and chains
// them into prefix hashes (one running hash, kept per prefix). Then:
//
//   - its primary parent is the turn whose transcript is its longest
//     registered prefix (at least one new message after it);
//   - every later assistant message of the request that is the answer of
//     another turn Q of the same conversation makes Q a parent too (fan-in),
//     when Q's transcript is the request's first c messages followed by the
//     messages since the last parent up to that answer, which is what the
//     trace's history merge (parents' transcripts, a shared prefix once)
//     rebuilds;
//   - the messages after the last parent's answer are the turn's new
//     messages.
//
// A request whose only parent is its conversation's latest turn is a chat
// turn, as before graphs (no Parents written). A request continuing an
// older turn (a parallel branch from one history, a regenerate) joins the
// same conversation with that turn as its parent, and one holding several
// answers lists them all. Parents are found within one conversation:
// answers of independent conversations in one history (three unrelated
// first requests, then one holding all three) leave the request in the
// primary's conversation with those answers as new messages.
//
// Memory is bounded by two generations of at most max/2 keys each: when
// the current one fills, the older one is dropped, so conversations idle
// for a long time start afresh.
type conversations struct {
	seed           maphash.Seed
	cur, old       map[uint64]*turnRef   // by transcript hash
	ansCur, ansOld map[uint64][]*turnRef // by answer message hash
	max            int
	byKey          map[string]*conv // conversations named by a session header, same bound
	// respCur, respOld: turns by their answer's Responses id (two
	// generations, as cur and old)
	respCur, respOld map[string]*turnRef
	next             int64
	mh, states       []uint64 // scratch of match, under the proxy's lock
}

// conv is one conversation as the proxy has seen it. Turn numbers restart
// in each file segment (each file replays on its own), so a conversation
// crossing into a new segment starts there with its whole history as the
// first turn's messages.
type conv struct {
	id      string
	seq     int32    // turns ever
	seg     *segment // segment of the latest turn
	segBase int32    // seq of its first turn in seg
	start   int64    // arrival of its first turn in seg (proxy clock, ns)
	// prevDone is when the latest turn's response ended (proxy clock, ns).
	prevDone int64
}

// turnRef is a registered transcript: conversation c after its turn seq.
type turnRef struct {
	c    *conv
	seg  *segment
	seq  int32
	n    int    // messages in the transcript (the answer included)
	h    uint64 // transcript hash
	done int64  // when its response ended (proxy clock, ns)
}

func newConversations(max int) *conversations {
	if max < 2 {
		max = 2
	}
	return &conversations{seed: maphash.MakeSeed(), cur: map[uint64]*turnRef{}, old: map[uint64]*turnRef{},
		ansCur: map[uint64][]*turnRef{}, ansOld: map[uint64][]*turnRef{}, max: max, byKey: map[string]*conv{},
		respCur: map[string]*turnRef{}, respOld: map[string]*turnRef{}}
}

// messageHash hashes one message, normalised (role, trimmed content, tool
// call id, tool calls, its media's content hashes) so whitespace differences in echoed answers still
// match.
func (cs *conversations) messageHash(m *trace.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(cs.seed)
	var n [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.WriteString(s)
	}
	str(m.Role)
	str(strings.TrimSpace(m.Content))
	str(m.ToolCallID)
	for _, c := range m.ToolCalls {
		str(c.ID)
		str(c.Name)
		str(c.Arguments)
	}
	for i := range m.Media {
		str(m.Media[i].Hash)
	}
	return h.Sum64()
}

// chain extends a transcript hash by one message hash (splitmix64's
// finaliser over the pair).
func chain(h, m uint64) uint64 {
	x := h*0x9e3779b97f4a7c15 + m + 0x632be59bd9b4e019
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// hashes fills cs.mh with each message's hash and cs.states with the
// prefix hashes: states[k] is the hash of msgs[:k].
func (cs *conversations) hashes(msgs []trace.Message) {
	cs.mh, cs.states = cs.mh[:0], cs.states[:0]
	h := uint64(0)
	cs.states = append(cs.states, h)
	for i := range msgs {
		m := cs.messageHash(&msgs[i])
		cs.mh = append(cs.mh, m)
		h = chain(h, m)
		cs.states = append(cs.states, h)
	}
}

func (cs *conversations) lookup(key uint64) *turnRef {
	if r, ok := cs.cur[key]; ok {
		return r
	}
	if r, ok := cs.old[key]; ok {
		cs.put(key, r)
		return r
	}
	return nil
}

func (cs *conversations) answers(key uint64) []*turnRef {
	if rs, ok := cs.ansCur[key]; ok {
		return rs
	}
	return cs.ansOld[key]
}

func (cs *conversations) put(key uint64, r *turnRef) {
	if len(cs.cur) >= cs.max/2 {
		cs.old, cs.cur = cs.cur, make(map[uint64]*turnRef, cs.max/2)
		cs.ansOld, cs.ansCur = cs.ansCur, make(map[uint64][]*turnRef, cs.max/2)
	}
	cs.cur[key] = r
}

// match is what a request continues.
type match struct {
	c       *conv      // nil: a new conversation
	histLen int        // leading messages that are history
	parents []*turnRef // the turns it waits for, primary first
}

// match finds the conversation and the turns msgs continue (see the type's
// doc comment).
func (cs *conversations) match(msgs []trace.Message) match {
	cs.hashes(msgs)
	var prim *turnRef
	for k := len(msgs) - 1; k >= 1; k-- { // at least one new message
		if r := cs.lookup(cs.states[k]); r != nil && r.n == k {
			prim = r
			break
		}
	}
	if prim == nil {
		return match{}
	}
	m := match{c: prim.c, histLen: prim.n, parents: []*turnRef{prim}}
	for j := m.histLen; j < len(msgs)-1; j++ {
		if msgs[j].Role != "assistant" {
			continue
		}
	next:
		for _, q := range cs.answers(cs.mh[j]) {
			if q.c != prim.c || q.seg != prim.seg {
				continue
			}
			for _, p := range m.parents {
				if p == q {
					continue next
				}
			}
			// q's transcript = msgs[:c0] + msgs[histLen:j+1], sharing
			// exactly c0 messages with what is merged so far
			c0 := q.n - (j + 1 - m.histLen)
			if c0 < 0 || c0 > m.histLen || (c0 < m.histLen && cs.mh[c0] == cs.mh[m.histLen]) {
				continue
			}
			h := cs.states[c0]
			for i := m.histLen; i <= j; i++ {
				h = chain(h, cs.mh[i])
			}
			if h == q.h {
				m.parents = append(m.parents, q)
				m.histLen = j + 1
				break
			}
		}
	}
	return m
}

// register records that c's turn seq ended at done with answer after msgs,
// and returns its entry.
func (cs *conversations) register(c *conv, seg *segment, seq int32, msgs []trace.Message, answer trace.Message, done int64) *turnRef {
	cs.hashes(msgs)
	a := cs.messageHash(&answer)
	r := &turnRef{c: c, seg: seg, seq: seq, n: len(msgs) + 1, h: chain(cs.states[len(msgs)], a), done: done}
	cs.put(r.h, r)
	cs.ansCur[a] = append(cs.ansCur[a], r)
	return r
}

// registerResponse records that the answer of turn r had the Responses
// id id, which a later request names as its previous_response_id.
func (cs *conversations) registerResponse(id string, r *turnRef) {
	if len(cs.respCur) >= cs.max/2 {
		cs.respOld, cs.respCur = cs.respCur, make(map[string]*turnRef, cs.max/2)
	}
	cs.respCur[id] = r
}

// byResponse is the turn whose answer had the Responses id id, nil when
// none (or it is forgotten).
func (cs *conversations) byResponse(id string) *turnRef {
	if r, ok := cs.respCur[id]; ok {
		return r
	}
	return cs.respOld[id]
}

// session returns the conversation named key by a session header.
func (cs *conversations) session(key string) *conv {
	c := cs.byKey[key]
	if c == nil {
		if len(cs.byKey) >= cs.max {
			clear(cs.byKey) // crude bound: long-idle sessions restart
		}
		c = &conv{id: key}
		cs.byKey[key] = c
	}
	return c
}
