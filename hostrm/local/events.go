package local

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// keptEvents bounds the clients' events the universe keeps for
// AwaitEvents; a watcher that fell further behind is told it missed some.
const keptEvents = 1024

// events is the universe's log of clients' events (EventClientPrefix),
// numbered from 1. Guarded by the universe's mu.
type events struct {
	log  []plugin.Event // the newest keptEvents, oldest first
	next uint64         // the Seq the next event gets, less 1
	// changed wakes the watchers: on an event, a job's abort or failure
	// (failFences) and the run's end, not on every change of the
	// universe (a step's coordinator holds a watch per PMIx node).
	changed wake.Cond
}

// keepEvent logs a client's event for the jobs that are to hear it.
// Called with mu held.
func (u *Universe) keepEvent(req *plugin.EventRequest) {
	u.events.next++
	u.events.log = append(u.events.log, plugin.Event{Seq: u.events.next, EventRequest: *req})
	if n := len(u.events.log); n > keptEvents {
		u.events.log = append(u.events.log[:0:0], u.events.log[n-keptEvents:]...)
	}
	u.events.changed.Broadcast()
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
// after req.After, waiting up to req.Timeout for one. A job hears only
// events kept after it was made (a job spawned later does not get its
// elders' old news). An aborted or failed job's wait fails at once, as
// its lookups do; the run's end ends every wait.
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
		from := req.After
		if j := u.jobs[req.Nspace]; j != nil {
			from = max(from, j.eventsFrom)
		}
		resp := &plugin.AwaitEventsResponse{}
		log := u.events.log
		if len(log) > 0 && log[0].Seq-1 > from {
			resp.Missed = true // some after from were dropped
		}
		// The log is in Seq order: only its tail after from is looked at.
		i, _ := slices.BinarySearchFunc(log, from, func(e plugin.Event, seq uint64) int {
			if e.Seq <= seq {
				return -1
			}
			return 1
		})
		for _, e := range log[i:] {
			if hears(req.Nspace, &e.EventRequest) {
				resp.Events = append(resp.Events, e)
			}
		}
		ch := u.events.changed.C()
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
