// Package memo is a bounded, concurrency-safe map for results computed from
// exactly their key, which the caller would compute again identically: it
// saves the work, never a check. A full map is cleared, not evicted entry by
// entry: the working set of an agent's statements refills it at once.
package memo

import "sync"

// Map holds at most Max entries (a zero Max holds none).
type Map[K comparable, V any] struct {
	Max int

	mu sync.Mutex
	m  map[K]V
}

// Get returns the value stored for k.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put stores v for k, clearing the map first when it is full.
func (c *Map[K, V]) Put(k K, v V) {
	if c.Max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.Max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
}

// Len is the number of entries.
func (c *Map[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
