package daemon

import (
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
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
func (c *counts) hold(key string, perKey, all int) bool { return c.add(key, 1, perKey, all) }

// add counts n more of key, unless key would then hold more than perKey
// or all more than all (0: no bound in all).
func (c *counts) add(key string, n, perKey, all int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]+n > perKey || all > 0 && c.total+n > all {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key] += n
	c.total += n
	return true
}

// sub gives back n of key.
func (c *counts) sub(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n = min(n, c.n[key])
	c.total -= n
	if c.n[key] -= n; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// sum is what all keys hold.
func (c *counts) sum() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// release gives back one hold of key.
func (c *counts) release(key string) { c.sub(key, 1) }

// Bounds on what callers other than root may make the daemon hold at
// once, per user (per user of a node, at a hub) and in all. Root is bound
// by none: it is trusted, and its tools must answer while another user is
// at her bounds.
const (
	// maxFrame is the largest call: a fence across runs carries a run's
	// part of the data, Open MPI's business cards, some KiB a rank.
	maxFrame = 16 << 20
	// maxConnsPerUser is how many connections one user may hold open
	// (a run holds one, a tool one while it runs), and maxConns every
	// user but root: below the daemon's descriptors (LimitNOFILE=20000).
	maxConnsPerUser = 256
	maxConns        = 4096
	// maxBytesPerUser is how many bytes of calls one user may have read
	// and not answered yet, and maxBytes every user but root.
	maxBytesPerUser = 64 << 20
	maxBytes        = 512 << 20
	// maxInFlightPerUser is how many calls of one user may be in flight
	// (a lookup that waits is one; a run of 1,024 ranks that all wait
	// for names holds 1,024), and maxInFlight every user's but root's.
	maxInFlightPerUser = 4096
	maxInFlight        = 32768
	// maxRefusing is how many refused connections may be told why at
	// once; past it one is closed at once.
	maxRefusing = 32
)

// budgets counts what each caller holds; one userBudget per connection
// charges it. Safe for use from any goroutine; the zero value is ready.
type budgets struct {
	bytes counts
	calls counts
}

// userBudget is one caller's link.Budget: key is the caller ("uid" on
// this node, "node/uid" relayed to a hub), refused logs a refusal.
type userBudget struct {
	b       *budgets
	key     string
	who     string // "uid N", for the caller's message
	refused func(error)
}

func (u userBudget) TakeBytes(n int) error {
	if u.b.bytes.add(u.key, n, maxBytesPerUser, maxBytes) {
		return nil
	}
	err := plugin.Errorf(plugin.ErrUnavailable, "the node daemon holds %d MiB of unanswered calls of %s, the most one user may (or %d MiB of every user's)",
		maxBytesPerUser>>20, u.who, maxBytes>>20)
	u.refused(err)
	return err
}

func (u userBudget) FreeBytes(n int) { u.b.bytes.sub(u.key, n) }

func (u userBudget) TakeCall() error {
	if u.b.calls.hold(u.key, maxInFlightPerUser, maxInFlight) {
		return nil
	}
	err := plugin.Errorf(plugin.ErrUnavailable, "the node daemon has %d calls of %s in flight, the most one user may (or %d of every user's)",
		maxInFlightPerUser, u.who, maxInFlight)
	u.refused(err)
	return err
}

func (u userBudget) FreeCall() { u.b.calls.release(u.key) }
