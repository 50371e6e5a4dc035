package bridge

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// putNodeAttr stores a node attribute and wakes its waiters.
func (s *Session) putNodeAttr(r *request, key, val string) {
	j := s.j
	if len(key) > j.cfg.Limits.KeyMax {
		r.fail(wire.RcInvalidKeyLength, fmt.Errorf("info-putnodeattr: key of %d bytes exceeds %d", len(key), j.cfg.Limits.KeyMax))
		return
	}
	if len(val) > j.cfg.Limits.ValMax {
		r.fail(wire.RcInvalidValLength, fmt.Errorf("info-putnodeattr %s: value of %d bytes exceeds %d", key, len(val), j.cfg.Limits.ValMax))
		return
	}
	j.mu.Lock()
	j.nodeAttrs[key] = val
	waits := j.attrWaits.takeKey(key)
	j.mu.Unlock()
	r.ok()
	for _, w := range waits {
		w.req.ok("found", "TRUE", "value", val)
	}
}

// getNodeAttr answers at once, or with wait=TRUE parks until the key is
// put on this node or the node-attribute timeout passes.
func (s *Session) getNodeAttr(r *request, key string, wait bool) {
	j := s.j
	j.mu.Lock()
	if v, ok := j.nodeAttrs[key]; ok {
		j.mu.Unlock()
		r.ok("found", "TRUE", "value", v)
		return
	}
	if !wait {
		j.mu.Unlock()
		r.ok("found", "FALSE")
		return
	}
	if j.ended {
		err := j.endedErrLocked("info-getnodeattr " + key)
		j.mu.Unlock()
		r.failKV(wire.RcFail, err, failKV(r)...)
		return
	}
	d := j.cfg.Timeouts.NodeAttr
	j.attrWaits.park(j, key, &waiter{req: r, key: key}, d, func() {
		r.failKV(wire.RcFail, fmt.Errorf("info-getnodeattr %s: no task on node %s put it within %s", key, j.lay.node.Name, d), failKV(r)...)
	})
	j.mu.Unlock()
}

// getJobAttr serves job attributes, then (as Hydra does) the KVS.
func (s *Session) getJobAttr(r *request, key string) {
	j := s.j
	if v, ok := j.attrs[key]; ok {
		r.ok("found", "TRUE", "value", v)
		return
	}
	if key == hasNameServ {
		s.hasNameServ(r)
		return
	}
	j.mu.Lock()
	v, _, ok := j.store.Get(key)
	j.mu.Unlock()
	if ok {
		r.ok("found", "TRUE", "value", v)
		return
	}
	s.backendAttr(r, key)
}

// hasNameServ is the PMI-2 job attribute that says whether the name
// service works: whether the backend publishes.
const hasNameServ = "hasNameServ"

func (s *Session) hasNameServ(r *request) {
	down := func(err error) { r.fail(wire.RcFail, fmt.Errorf("%s %s: %w", r.cmd, hasNameServ, err)) }
	s.async(r, "", "", toBackend, down, func(context.Context) {
		r.foundValue(wire.FormatBool(s.j.be.Has(plugin.CapPublish)))
	})
}

// backendAttr answers a key found nowhere else from the attributes the
// backend owns, waiting for the backend if it is still starting. A
// backend that is not available has none.
func (s *Session) backendAttr(r *request, key string) {
	j := s.j
	answer := func() {
		if v, ok := j.be.Attr(key); ok {
			r.foundValue(v)
		} else {
			r.notFound(key)
		}
	}
	if j.be.Known() {
		answer()
		return
	}
	s.async(r, "", "", toBackend, func(error) { r.notFound(key) }, func(context.Context) { answer() })
}
