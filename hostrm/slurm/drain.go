package slurm

import (
	"context"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/wake"
)

// drain is the children's parts a node is passing up and down: a node's
// own ranks, answered first, may finalize and end the node's process
// while a child's answer still has to pass through it.
type drain struct {
	crew *crew.Crew

	mu       sync.Mutex
	children map[string]int // per fence ID, the parts on their way
	lastEnd  time.Time      // when a child's part last returned
	done     wake.Cond      // broadcast as each part ends
}

// call counts a child's part of fence id in (+1) or out (-1).
func (d *drain) call(id string, n int) {
	d.mu.Lock()
	if d.children == nil {
		d.children = map[string]int{}
	}
	d.children[id] += n
	if d.children[id] <= 0 {
		delete(d.children, id)
		d.lastEnd = d.crew.Now()
	}
	d.mu.Unlock()
	if n < 0 {
		d.done.Broadcast()
	}
}

// await waits, at most childDrain or until ctx ends, until no
// child's part of fence id ("": of any fence) is still on its way through
// this node, and childFlush after the last one returned, for its answer
// to be written. A fence's parts are answered together, but this node's
// ranks, answered first, may finalize and end the node's gopmi (its stepd
// kills it with them) while a child's answer still has to pass through
// it: a node waits so per fence, or with WithFinalizeDrain once, for any
// fence, before its ranks finalize. A fence of other ranks passing
// through (a subset's, another job's) holds that wait up to childDrain:
// its parts would be cut off when the node ends anyway.
func (d *drain) await(ctx context.Context, id string) {
	bound, stop := d.crew.Alarm(childDrain)
	defer stop()
	for {
		d.mu.Lock()
		n := d.children[id]
		if id == "" {
			for _, c := range d.children {
				n += c
			}
		}
		last := d.lastEnd
		ch := d.done.C()
		d.mu.Unlock()
		if n == 0 {
			if left := childFlush - d.crew.Now().Sub(last); !last.IsZero() && left > 0 {
				d.crew.Sleep(ctx, left)
			}
			return
		}
		select {
		case <-ch:
		case <-bound:
			return
		case <-ctx.Done():
			return
		}
	}
}
