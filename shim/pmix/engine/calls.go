package engine

// The calls that go to the backend as they came: connect, spawn, the name
// service, queries, logs, aborts and events.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Op makes call of the backend for p's what (an abort, a publish, an
// unpublish, a log) and gives done its error.
func (e *Engine) Op(what string, p plugin.Proc, call func(context.Context, plugin.Full) error, done func(error)) error {
	return e.run(plugin.DefaultLookupTimeout, func(ctx context.Context) {
		err := call(ctx, e.be)
		if err != nil {
			e.warnUnlessNotFound(err, what, p)
		}
		done(err)
	})
}

// Query asks the backend req and gives done its answer.
func (e *Engine) Query(req *plugin.QueryRequest, done func(*plugin.QueryResponse, error)) error {
	return e.run(plugin.DefaultLookupTimeout, func(ctx context.Context) {
		resp, err := e.be.Query(ctx, req)
		if err != nil {
			e.log.Debug().Err(err).Msg("pmix: query")
		}
		done(resp, err)
	})
}

// Lookup asks the backend req and gives done its answer.
func (e *Engine) Lookup(req *plugin.LookupRequest, done func(*plugin.LookupResponse, error)) error {
	return e.run(req.TimeoutOrDefault()+callGrace, func(ctx context.Context) {
		resp, err := e.be.Lookup(ctx, req)
		if err != nil {
			e.log.Debug().Err(err).Str("proc", req.Proc.String()).Msg("pmix: lookup")
		}
		done(resp, err)
	})
}

// Connect is PMIx_Connect (connect) or PMIx_Disconnect of procs, within
// timeout (0: the run's): the backend records the jobs as connected or
// not. Every member's server calls it; the backend's Connect is no
// barrier, and need not be: what a member reads of the others next
// (their data, by direct modex) waits for them in the backend.
func (e *Engine) Connect(procs []plugin.Proc, timeout time.Duration, connect bool, done func(error)) error {
	d := plugin.TimeoutOr(timeout, e.fenceTimeout)
	what := "disconnect"
	if connect {
		what = "connect"
	}
	if len(nspaces(procs)) == 1 {
		// Processes of one job among themselves (Open MPI's
		// MPI_Comm_accept/connect and MPI_Comm_join within a job): no
		// jobs to connect, their data is the job's already, and PMIx's
		// connect and disconnect are collectives of the processes
		// named: a fence of theirs, which ends once every node's
		// participants arrived.
		req := e.jobs.fence(procs)
		req.ID = what + ":" + req.ID
		req.Timeout = d
		return e.Op(what, e.jobs.requestor(), func(ctx context.Context, be plugin.Full) error {
			_, err := be.Fence(ctx, req)
			return err
		}, done)
	}
	return e.Op(what, e.jobs.requestor(), func(ctx context.Context, be plugin.Full) error {
		if !connect {
			return be.Disconnect(ctx, &plugin.DisconnectRequest{Procs: procs, Timeout: d})
		}
		if err := e.registerOthers(ctx, procs); err != nil {
			return err
		}
		if err := e.publish(ctx, procs, d); err != nil {
			return err
		}
		_, err := be.Connect(ctx, &plugin.ConnectRequest{Procs: procs, Timeout: d})
		return err
	}, done)
}

// Spawn starts a job through the backend (PMIx_Spawn, MPI_Comm_spawn)
// and gives done its namespace. libpmix learns of the new job from the
// answer, and a connect with it would wait for its registration: a spawn
// whose job cannot be registered fails, and its job is ended.
func (e *Engine) Spawn(req *plugin.SpawnRequest, done func(string, error)) error {
	req.Timeout = plugin.TimeoutOr(req.Timeout, e.fenceTimeout)
	return e.run(req.Timeout+callGrace, func(ctx context.Context) {
		resp, err := e.be.Spawn(ctx, req)
		if err == nil {
			child := plugin.Proc{Nspace: resp.Nspace, Rank: plugin.RankWildcard}
			if err = e.registerOthers(ctx, []plugin.Proc{child}); err != nil {
				// Its children must not wait for parents that gave up.
				nctx, cancel := news(ctx)
				aerr := e.be.Abort(nctx, &plugin.AbortRequest{Proc: req.Requestor, Status: 1,
					Message: "its spawn failed: " + err.Error(), Targets: []plugin.Proc{child}})
				cancel()
				if aerr != nil {
					e.log.Warn().Err(aerr).Str("job", resp.Nspace).Msg("pmix: end the job of a failed spawn")
				}
			}
		}
		if err != nil {
			e.log.Warn().Err(err).Str("proc", req.Requestor.String()).Msg("pmix: spawn")
			done("", err)
			return
		}
		done(resp.Nspace, nil)
	})
}

// NotifyEvent passes a client's event on to other nodes (the backend),
// raised on this one.
func (e *Engine) NotifyEvent(req *plugin.EventRequest) error {
	req.Node = e.jobs.nodeName()
	return e.run(newsBound, func(ctx context.Context) {
		nctx, cancel := news(ctx)
		defer cancel()
		if err := e.be.NotifyEvent(nctx, req); err != nil {
			e.log.Warn().Err(err).Str("code", string(req.Code)).Str("source", req.Source.String()).Msg("pmix: an event for other nodes not passed on")
		}
	})
}

// eventWait is how long one AwaitEvents call waits for an event before
// the watcher asks again.
const eventWait = time.Minute

// watchEvents gives this server's clients the events raised for job
// nspace's processes elsewhere (AwaitEvents): on other nodes, or by
// another job's server on this node. It ends when the server closes, the
// job is aborted or failed, or the backend does not keep events.
func (b *base) watchEvents(nspace, node string) {
	b.crew.Spawn(func(ctx context.Context) {
		var after uint64
		failed := 0 // calls failed in a row
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, eventWait+newsBound)
			resp, err := b.be.AwaitEvents(cctx, &plugin.AwaitEventsRequest{Nspace: nspace, After: after, Timeout: eventWait})
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, plugin.ErrNotSupported):
				b.log.Debug().Err(err).Msg("pmix: the backend does not carry clients' events between nodes")
				return
			case errors.Is(err, plugin.ErrAborted):
				return // the job was aborted or failed, or the run ends
			case err != nil:
				// One failure is the usual end of a step (the link up
				// went with its node); more say the events are lost.
				failed++
				ev := b.log.Debug()
				if failed > 2 {
					ev = b.log.Warn()
				}
				ev.Err(err).Str("job", nspace).Msg("pmix: waiting for other nodes' events")
				b.crew.Sleep(ctx, time.Second)
				continue
			}
			failed = 0
			if resp.Missed {
				b.log.Warn().Str("job", nspace).Msg("pmix: some events of other nodes were lost: the backend no longer kept them")
			}
			for _, e := range resp.Events {
				after = max(after, e.Seq)
				// This server raised it (libpmix gave it to its clients
				// then) when it comes from this node and this job.
				if e.Node == node && e.Source.Nspace == nspace {
					continue
				}
				code, err := strconv.Atoi(strings.TrimPrefix(string(e.Code), plugin.EventClientPrefix))
				if err != nil || !strings.HasPrefix(string(e.Code), plugin.EventClientPrefix) {
					continue // not a client's event
				}
				if err := b.lib.Deliver(code, e); err != nil {
					b.log.Warn().Err(err).Str("code", string(e.Code)).Str("source", e.Source.String()).Msg("pmix: an event of another node not given to this node's clients")
				}
			}
		}
	})
}
