package bridge

import "time"

// waits are requests parked until something happens (a world fence ends,
// a node attribute is put) or their deadline passes, by what they wait
// for. The one timed-wait implementation: lazy gets and info-getnodeattr
// both park here. Guarded by j.mu.
type waits[K comparable] struct {
	m map[K][]*waiter
}

// waiter is a parked request.
type waiter struct {
	req  *request
	key  string      // the key it asked for
	stop func() bool // its deadline; nil without one
}

// park parks w.req under k until taken, or until d passes, when expire
// answers it. Call with j.mu held.
func (l *waits[K]) park(j *Job, k K, w *waiter, d time.Duration, expire func()) {
	if l.m == nil {
		l.m = make(map[K][]*waiter)
	}
	w.req.park()
	w.stop = j.calls.after(d, func() {
		j.mu.Lock()
		mine := l.drop(k, w)
		if mine {
			w.req.unpark()
		}
		j.mu.Unlock()
		if mine {
			expire()
		}
	})
	l.m[k] = append(l.m[k], w)
}

// take removes the waiters under every key that match accepts, stops
// their deadlines and unparks them: the caller answers them after
// unlocking.
func (l *waits[K]) take(match func(K) bool) []*waiter {
	var out []*waiter
	for k, ws := range l.m {
		if !match(k) {
			continue
		}
		for _, w := range ws {
			w.stop()
			w.req.unpark()
		}
		out = append(out, ws...)
		delete(l.m, k)
	}
	return out
}

// takeKey is take for one key.
func (l *waits[K]) takeKey(k K) []*waiter {
	return l.take(func(x K) bool { return x == k })
}

// drop removes w from under k and reports whether it was there.
func (l *waits[K]) drop(k K, w *waiter) bool {
	ws := l.m[k]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			if len(ws) == 0 {
				delete(l.m, k)
			} else {
				l.m[k] = ws
			}
			return true
		}
	}
	return false
}

// stopAll stops every deadline: the job ended, and its end answers the
// parked requests.
func (l *waits[K]) stopAll() {
	for _, ws := range l.m {
		for _, w := range ws {
			w.stop()
		}
	}
}
