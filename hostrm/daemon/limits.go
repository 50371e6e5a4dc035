package daemon

import (
	"sync"
	"time"
)

// quietly decides which of a stream of alike lines get logged: each key
// once a minute at most, counting those that were not. A client that
// retries every second, or a user who polls, cannot flood the journal.
// Safe for use from any goroutine; the zero value is ready.
type quietly struct {
	mu   sync.Mutex
	seen map[string]*seenKey
}

type seenKey struct {
	logged time.Time
	quiet  int // times not logged since
}

// maxQuietKeys bounds what quietly remembers: past it, it forgets all.
const maxQuietKeys = 10000

// news reports whether a line of key should be logged now and, if so, how
// many of its lines were not since the last one.
func (q *quietly) news(key string) (ok bool, notLogged int) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.seen[key]; s != nil && now.Sub(s.logged) < time.Minute {
		s.quiet++
		return false, 0
	} else if s != nil {
		notLogged = s.quiet
	}
	if q.seen == nil || len(q.seen) >= maxQuietKeys {
		q.seen = map[string]*seenKey{}
	}
	q.seen[key] = &seenKey{logged: now}
	return true, notLogged
}

// counts bounds what is held open at once: per key, and in all. Safe for
// use from any goroutine; the zero value is ready.
type counts struct {
	mu    sync.Mutex
	n     map[string]int
	total int
}

// hold counts one more of key, unless key holds perKey already or all
// hold all (0: no bound in all).
func (c *counts) hold(key string, perKey, all int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= perKey || (all > 0 && c.total >= all) {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	c.total++
	return true
}

// release gives back one hold of key.
func (c *counts) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] > 0 {
		c.total--
	}
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}
