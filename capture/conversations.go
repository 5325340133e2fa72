package capture

import (
	"encoding/binary"
	"hash/maphash"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// conversations groups chat requests into conversations by their message
// history: a request whose messages start with an earlier request's
// messages followed by that request's answer continues its conversation.
//
// Each finished turn registers the hash of (its messages + its answer). A
// new request hashes every prefix of its messages (one rolling hash) and
// takes the longest prefix that is registered: the messages after it are
// the turn's new messages. Only the latest turn of a conversation can be
// continued; a second request from the same history (a regenerate, a
// branch) starts a new conversation carrying the whole history.
//
// Memory is bounded by two generations of at most max/2 keys each: when
// the current one fills, the older one is dropped, so conversations idle
// for a long time start afresh.
type conversations struct {
	seed     maphash.Seed
	cur, old map[uint64]*turnRef
	max      int
	byKey    map[string]*conv // conversations named by a session header, same bound
	next     int64
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

// turnRef is a registered history: conversation c after its turn seq.
type turnRef struct {
	c   *conv
	seq int32
}

func newConversations(max int) *conversations {
	if max < 2 {
		max = 2
	}
	return &conversations{seed: maphash.MakeSeed(), cur: map[uint64]*turnRef{}, old: map[uint64]*turnRef{}, max: max, byKey: map[string]*conv{}}
}

// prefixHashes returns h[k] = hash of msgs[:k+1], normalised (role and
// trimmed content) so whitespace differences in echoed answers still match.
func (cs *conversations) prefixHashes(msgs []trace.Message, dst []uint64) []uint64 {
	var h maphash.Hash
	h.SetSeed(cs.seed)
	dst = dst[:0]
	var n [8]byte
	for _, m := range msgs {
		h.WriteString(m.Role)
		h.WriteByte(0)
		c := strings.TrimSpace(m.Content)
		binary.LittleEndian.PutUint64(n[:], uint64(len(c)))
		h.Write(n[:])
		h.WriteString(c)
		dst = append(dst, h.Sum64())
	}
	return dst
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

func (cs *conversations) put(key uint64, r *turnRef) {
	if len(cs.cur) >= cs.max/2 {
		cs.old, cs.cur = cs.cur, make(map[uint64]*turnRef, cs.max/2)
	}
	cs.cur[key] = r
}

// match finds the conversation msgs continue: the conversation, the turn
// it continues, and how many leading messages are history. c is nil for a
// new conversation.
func (cs *conversations) match(msgs []trace.Message) (c *conv, histLen int) {
	hs := cs.prefixHashes(msgs, nil)
	for k := len(hs) - 2; k >= 0; k-- { // at least one new message
		if r := cs.lookup(hs[k]); r != nil && r.seq == r.c.seq-1 {
			return r.c, k + 1
		}
	}
	return nil, 0
}

// register records that c's turn seq ended with answer after msgs.
func (cs *conversations) register(c *conv, seq int32, msgs []trace.Message, answer string) {
	full := append(msgs[:len(msgs):len(msgs)], trace.Message{Role: "assistant", Content: answer})
	hs := cs.prefixHashes(full, nil)
	cs.put(hs[len(hs)-1], &turnRef{c: c, seq: seq})
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
