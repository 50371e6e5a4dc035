package bridge

import "sync"

// event runs callbacks once, when it fires; a callback added after that
// runs at once, on the caller's goroutine. The backend's bring-up ending
// and the job's end are events; work waiting for either registers here
// and removes itself (stop) when something else claimed it first.
type event struct {
	mu    sync.Mutex
	fired bool
	fs    []*func() // nil entries were stopped
}

// on registers f and returns its stop, which reports whether it kept f
// from running.
func (e *event) on(f func()) (stop func() bool) {
	e.mu.Lock()
	if e.fired {
		e.mu.Unlock()
		f()
		return func() bool { return false }
	}
	p := &f
	e.fs = append(e.fs, p)
	e.mu.Unlock()
	return func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, x := range e.fs {
			if x == p {
				e.fs = append(e.fs[:i], e.fs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// fire runs the registered callbacks, in order, on the caller's
// goroutine, the first time it is called.
func (e *event) fire() {
	e.mu.Lock()
	if e.fired {
		e.mu.Unlock()
		return
	}
	e.fired = true
	fs := e.fs
	e.fs = nil
	e.mu.Unlock()
	for _, f := range fs {
		(*f)()
	}
}
