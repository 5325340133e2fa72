package mock

import "sync"

// prefixCache models vLLM's automatic prefix caching at the granularity of
// prompt segments (chat messages, or 256-byte blocks of a completion
// prompt). Each segment is keyed by the hash of the whole prompt up to it,
// so a hit on segment k implies the same history before it. A lookup walks
// the chain from the start and stops at the first miss, as vLLM's block
// lookup does. Capacity is in tokens, eviction is least recently used.
type prefixCache struct {
	mu         sync.Mutex
	capacity   int
	used       int
	m          map[uint64]*cacheEntry
	head, tail *cacheEntry // head is the most recently used
}

type cacheEntry struct {
	key        uint64
	tokens     int // tokens this segment adds to its prefix
	prev, next *cacheEntry
}

func newPrefixCache(capacityTokens int) *prefixCache {
	return &prefixCache{capacity: capacityTokens, m: make(map[uint64]*cacheEntry)}
}

// lookup returns how many leading tokens of the prompt are cached and marks
// the hit segments as used.
func (c *prefixCache) lookup(segs []segment) int {
	if c.capacity == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(segs) && c.m[segs[hit].hash] != nil {
		hit++
	}
	// Touch in reverse so the first segment is the most recent: eviction
	// then takes a chain's tail before its head, keeping lookups coherent.
	for i := hit - 1; i >= 0; i-- {
		c.moveToFront(c.m[segs[i].hash])
	}
	if hit == 0 {
		return 0
	}
	return segs[hit-1].tokens
}

// insert caches every segment of segs (a prompt's chain, possibly extended
// by its answer), evicting least recently used segments beyond capacity.
func (c *prefixCache) insert(segs []segment) {
	if c.capacity == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(segs) - 1; i >= 0; i-- {
		prev := 0
		if i > 0 {
			prev = segs[i-1].tokens
		}
		if e := c.m[segs[i].hash]; e != nil {
			c.moveToFront(e)
			continue
		}
		e := &cacheEntry{key: segs[i].hash, tokens: segs[i].tokens - prev}
		c.m[e.key] = e
		c.used += e.tokens
		c.pushFront(e)
	}
	for c.used > c.capacity && c.tail != nil {
		e := c.tail
		c.unlink(e)
		delete(c.m, e.key)
		c.used -= e.tokens
	}
}

// reset empties the cache (POST /reset_prefix_cache).
func (c *prefixCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.head, c.tail, c.used = nil, nil, 0
}

func (c *prefixCache) unlink(e *cacheEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (c *prefixCache) pushFront(e *cacheEntry) {
	e.next = c.head
	if c.head != nil {
		c.head.prev = e
	}
	c.head = e
	if c.tail == nil {
		c.tail = e
	}
}

func (c *prefixCache) moveToFront(e *cacheEntry) {
	if c.head != e {
		c.unlink(e)
		c.pushFront(e)
	}
}
