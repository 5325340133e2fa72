package mock

import (
	"container/list"
	"sync"
)

// responseID is the id of the Responses answer to request id, as the
// encoder writes it and previous_response_id names it.
func responseID(requestID string) string { return "resp_" + requestID }

// responseStore keeps the transcripts of recent Responses answers (the
// request's input, after the history it continued, and the answer) by
// response id, so a request naming one in previous_response_id continues
// that conversation. It is bounded by the bytes of text it holds: the
// least recently used transcripts go first. Safe for concurrent use.
type responseStore struct {
	mu    sync.Mutex
	limit int64 // bytes; 0 stores nothing
	bytes int64
	order *list.List // of *storedResponse, most recent at the front
	byID  map[string]*list.Element
}

type storedResponse struct {
	id    string
	msgs  []Message
	bytes int64
}

func newResponseStore(limit int64) *responseStore {
	return &responseStore{limit: limit, order: list.New(), byID: map[string]*list.Element{}}
}

// size is what a transcript counts against the limit.
func size(id string, msgs []Message) int64 {
	n := int64(len(id))
	for _, m := range msgs {
		n += int64(len(m.Role) + len(m.Content) + 32)
	}
	return n
}

// put stores msgs under id, evicting the least recently used; a
// transcript larger than the whole limit is not stored.
func (s *responseStore) put(id string, msgs []Message) {
	n := size(id, msgs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byID[id]; ok {
		s.remove(el)
	}
	if n > s.limit {
		return
	}
	for s.bytes+n > s.limit {
		s.remove(s.order.Back())
	}
	s.byID[id] = s.order.PushFront(&storedResponse{id: id, msgs: msgs, bytes: n})
	s.bytes += n
}

// get returns the transcript stored under id.
func (s *responseStore) get(id string) ([]Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	s.order.MoveToFront(el)
	return el.Value.(*storedResponse).msgs, true
}

func (s *responseStore) remove(el *list.Element) {
	r := s.order.Remove(el).(*storedResponse)
	delete(s.byID, r.id)
	s.bytes -= r.bytes
}
