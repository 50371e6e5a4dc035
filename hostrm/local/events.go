package local

import (
	"context"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// keptEvents bounds the clients' events the universe keeps for
// AwaitEvents; a watcher that fell further behind is told it missed some.
const keptEvents = 1024

// events is the universe's log of clients' events (EventClientPrefix),
// numbered from 1. Guarded by the universe's mu.
type events struct {
	log  []plugin.Event // the newest keptEvents, oldest first
	next uint64         // the Seq the next event gets, less 1
}

// keepEvent logs a client's event for the jobs that are to hear it.
// Called with mu held.
func (u *Universe) keepEvent(req *plugin.EventRequest) {
	u.events.next++
	u.events.log = append(u.events.log, plugin.Event{Seq: u.events.next, EventRequest: *req})
	if n := len(u.events.log); n > keptEvents {
		u.events.log = append(u.events.log[:0:0], u.events.log[n-keptEvents:]...)
	}
	u.broadcast()
}

// hears reports whether a process of job nspace is to hear e: its own
// job's events of range namespace, anyone's of a wider range. Events of
// the node alone (RangeLocal) never reach the universe's log.
func hears(nspace string, e *plugin.EventRequest) bool {
	switch e.Range {
	case plugin.RangeNamespace:
		return e.Source.Nspace == nspace
	case plugin.RangeLocal:
		return false
	}
	return true
}

// AwaitEvents answers the clients' events job req.Nspace is to hear
// after req.After, waiting up to req.Timeout for one; a job that ended
// (or was never made) fails the wait as a lookup's.
func (u *Universe) AwaitEvents(ctx context.Context, req *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	step := "await events of " + req.Nspace
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	for {
		u.mu.Lock()
		if err := u.jobGone(step, req.Nspace); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		resp := &plugin.AwaitEventsResponse{}
		if len(u.events.log) > 0 && u.events.log[0].Seq > req.After+1 {
			resp.Missed = true
		}
		for _, e := range u.events.log {
			if e.Seq > req.After && hears(req.Nspace, &e.EventRequest) {
				resp.Events = append(resp.Events, e)
			}
		}
		ch := u.changed.C()
		u.mu.Unlock()
		if len(resp.Events) > 0 || req.Timeout <= 0 {
			return resp, nil
		}
		changed, err := waitChange(ctx, ch, timer.C)
		if err != nil {
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, err)
		}
		if !changed {
			return resp, nil
		}
	}
}

// isClientEvent reports whether code is a client's event
// (EventClientPrefix).
func isClientEvent(code plugin.EventCode) bool {
	return strings.HasPrefix(string(code), plugin.EventClientPrefix)
}
