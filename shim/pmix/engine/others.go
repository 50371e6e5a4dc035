package engine

// Processes hosted elsewhere: their data read by direct modex, their jobs
// registered with libpmix, and this node's data handed over for them.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// modexPoll is how soon DirectModex asks again for data its owner's
// server has not handed over yet, doubling up to modexPollMax.
const (
	modexPoll    = 10 * time.Millisecond
	modexPollMax = 500 * time.Millisecond
)

// keyWait is how long DirectModex waits, once it has data of the
// process, for the key libpmix needs (PMIX_REQUIRED_KEY) to appear in
// it: the process's server hands over its later commits. A key the
// process never puts (a transport it lacks) costs this much.
const keyWait = time.Second

// DirectModex reads p's data for a local client, from the frames p's
// node gave the backend, within timeout (0: the run's); key is the one
// libpmix needs (PMIX_REQUIRED_KEY), or "". done gets libpmix's answer:
// p's newest direct-modex frame.
func (e *Engine) DirectModex(p plugin.Proc, timeout time.Duration, key string, done func([]byte, error)) error {
	if p.Rank == plugin.RankWildcard {
		// Job-level data of another job: what its server registered,
		// which no fence carries.
		return plugin.Errorf(plugin.ErrNotFound, "direct modex of %s: job-level data is its server's", p)
	}
	req := &plugin.ModexRequest{Requestor: e.jobs.requestor(), Proc: p, Timeout: plugin.TimeoutOr(timeout, e.fenceTimeout)}
	return e.run(req.Timeout+callGrace, func(ctx context.Context) {
		data, err := e.directModex(ctx, req, key)
		if err != nil {
			e.warnUnlessNotFound(err, "direct modex", p)
		}
		done(data, err)
	})
}

// directModex asks the backend for req.Proc's node's frames. Its server
// hands them over when one of its clients commits or connects, which may
// come after this server's own client asked: until then, and within
// req.Timeout, it asks again. Data without key is a commit of the
// process's before the one that puts the key: libpmix would keep it and
// answer the key not found, so it waits up to keyWait for newer data
// with the key.
func (b *base) directModex(ctx context.Context, req *plugin.ModexRequest, key string) ([]byte, error) {
	deadline := b.crew.Now().Add(req.Timeout)
	var keyDeadline time.Time
	p := req.Proc
	for wait := modexPoll; ; wait = min(2*wait, modexPollMax) {
		resp, err := b.be.DirectModex(ctx, req)
		if err != nil {
			return nil, err
		}
		frames, err := parseFrames(resp.Data)
		if err != nil {
			return nil, err
		}
		now := b.crew.Now()
		if data := dmodexOf(frames, p.Nspace, uint32(p.Rank)); data != nil {
			if key == "" || bytes.Contains(data, append([]byte(key), 0)) { // a packed key is its bytes and a NUL
				return data, nil
			}
			if keyDeadline.IsZero() {
				keyDeadline = now.Add(keyWait)
			}
			if !now.Add(wait).Before(keyDeadline) {
				return data, nil // libpmix says what it lacks
			}
			wait = min(wait, keyDeadline.Sub(now))
		} else if now.Add(wait).After(deadline) {
			return nil, plugin.Errorf(plugin.ErrNotFound, "direct modex of %s: its server handed over no data of it in %s", p, plugin.RoundDuration(req.Timeout))
		}
		if !b.crew.Sleep(ctx, wait) {
			return nil, plugin.Errorf(plugin.ErrAborted, "direct modex of %s: %v", p, context.Cause(ctx))
		}
	}
}

// publish hands the backend the data of this node's clients among procs,
// for the other members of a connect: libpmix completes a fence whose
// processes are all its own without calling the server, so a job on one
// node may never have contributed any.
func (e *Engine) publish(ctx context.Context, procs []plugin.Proc, timeout time.Duration) error {
	_, local := e.jobs.local(procs)
	if len(local) == 0 {
		return nil
	}
	if err := e.commits.hand(ctx, local, e.commits.frames(ctx, local, false), timeout); err != nil {
		return fmt.Errorf("hand the clients' data to the backend: %w", err)
	}
	return nil
}

// registerOthers registers with libpmix the jobs among procs that this
// server does not know, as the backend's proc table lays them out: a
// client's read of a process of a job libpmix knows only partly waits
// for the job's registration, and never asks for its data.
func (b *base) registerOthers(ctx context.Context, procs []plugin.Proc) error {
	for _, ns := range nspaces(procs) {
		if b.jobs.known(ns) {
			continue
		}
		job, err := b.layoutOf(ctx, ns)
		if err != nil {
			return err
		}
		if err := b.lib.Register(job, -1); err != nil {
			return err
		}
		b.jobs.registered(ns)
	}
	return nil
}

// layoutOf is job ns's layout from the backend's proc table.
func (b *base) layoutOf(ctx context.Context, ns string) (plugin.Job, error) {
	resp, err := b.be.Query(ctx, &plugin.QueryRequest{Proc: b.jobs.requestor(), Queries: []plugin.Query{{
		Keys: []string{plugin.QueryProcTable}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: ns}}}}})
	if err != nil {
		return plugin.Job{}, fmt.Errorf("the layout of job %s: %w", ns, err)
	}
	v, ok := plugin.Qualifier(resp.Results, plugin.QueryProcTable)
	if !ok {
		return plugin.Job{}, plugin.Errorf(plugin.ErrNotFound, "the layout of job %s: the backend has no proc table of it", ns)
	}
	rows, err := plugin.DecodeProcTable(v)
	if err != nil {
		return plugin.Job{}, fmt.Errorf("the layout of job %s: %w", ns, err)
	}
	job := plugin.Job{Nspace: ns, Size: int32(len(rows))}
	nodes := map[string]int{}
	for _, r := range rows {
		i, ok := nodes[r.Node]
		if !ok {
			i = len(job.Nodes)
			nodes[r.Node] = i
			job.Nodes = append(job.Nodes, plugin.Node{ID: int32(i), Name: r.Node})
		}
		job.Nodes[i].Ranks = append(job.Nodes[i].Ranks, r.Rank)
	}
	job.UniverseSize = job.Size
	return job, job.Validate()
}
