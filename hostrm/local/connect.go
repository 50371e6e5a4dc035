package local

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// jobPair is two namespaces of the run, the lesser first: the unit the
// universe counts connections in.
type jobPair struct{ a, b string }

func (p jobPair) String() string { return p.a + " and " + p.b }

// connectJobs returns the distinct namespaces of procs, sorted, and the
// step name for messages ("connect gopmi.1.0,gopmi.1.1"). A connection
// needs two jobs at least; an empty namespace is malformed.
func connectJobs(verb string, procs []plugin.Proc) ([]string, string, error) {
	var nss []string
	for i, p := range procs {
		if p.Nspace == "" {
			return nil, verb, plugin.Errorf(plugin.ErrInvalidArgument, "%s: process %d of the request has an empty namespace", verb, i)
		}
		nss = append(nss, p.Nspace)
	}
	slices.Sort(nss)
	nss = slices.Compact(nss)
	step := verb + " " + strings.Join(nss, ",")
	if len(nss) < 2 {
		if len(nss) == 0 {
			step = verb
		}
		return nil, step, plugin.Errorf(plugin.ErrInvalidArgument, "%s: needs processes of two jobs at least, got %d", step, len(nss))
	}
	return nss, step, nil
}

// pairs lists every pair of the sorted namespaces nss.
func pairs(nss []string) []jobPair {
	var ps []jobPair
	for i, a := range nss {
		for _, b := range nss[i+1:] {
			ps = append(ps, jobPair{a, b})
		}
	}
	return ps
}

// connectionID names the connection of the sorted namespaces nss. It
// depends on the jobs alone, so every process of either side, and every
// later connect of the same jobs, gets the same ID.
func connectionID(nss []string) string {
	return "connect:" + strings.Join(nss, ",")
}

// quotedList formats names for a message: "x" or "x", "y".
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// Connect records that the jobs of req.Procs are connected (PMI-2
// job-connect, MPI_Comm_connect/accept between jobs) and returns an ID
// that depends on the set of jobs only.
//
// PMI-2 job-connect is a call of one process, not a collective: the
// universe does not wait for the other jobs to connect back, and
// req.Timeout is not used. Every process of a job may connect, so the
// universe counts Connects per pair of jobs and a Disconnect undoes one.
// A connection is between whole jobs: a proc's rank, RankWildcard or a
// rank of its job, is checked but not recorded.
//
// Every job must be known to the universe (plugin.ErrNotFound names the
// others) and still running: a job that finished is plugin.ErrNotFound,
// one that failed or was aborted plugin.ErrAborted. Two jobs at least are
// needed (plugin.ErrInvalidArgument). No info key is supported.
func (u *Universe) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	nss, step, err := connectJobs("connect", req.Procs)
	if err != nil {
		return nil, err
	}
	if err := u.names.RefuseInfo(step, req.Info); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, plugin.Errorf(plugin.ErrAborted, "%s: the run is ending", step)
	}
	var unknown []string
	for _, ns := range nss {
		if u.jobs[ns] == nil {
			unknown = append(unknown, ns)
		}
	}
	if len(unknown) > 0 && len(unknown) < len(nss) && u.opts.Beyond != nil {
		// Jobs of other runs: the node daemon knows them.
		for _, ns := range nss {
			if u.jobs[ns] != nil {
				if err := u.jobGone(step, ns); err != nil {
					return nil, err
				}
			}
		}
		u.mu.Unlock()
		resp, err := u.opts.Beyond.Connect(ctx, req)
		u.mu.Lock()
		if err != nil {
			return nil, err
		}
		for _, p := range pairs(nss) {
			u.conns[p]++
		}
		return resp, nil
	}
	switch len(unknown) {
	case 0:
	case 1:
		return nil, plugin.Errorf(plugin.ErrNotFound, "%s: no job %q in this run", step, unknown[0])
	default:
		return nil, plugin.Errorf(plugin.ErrNotFound, "%s: no jobs %s in this run", step, quotedList(unknown))
	}
	for _, p := range req.Procs {
		if j := u.jobs[p.Nspace]; p.Rank != plugin.RankWildcard && (p.Rank < 0 || p.Rank >= j.layout.Size) {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s has no rank %d", step, p.Nspace, p.Rank)
		}
	}
	for _, ns := range nss {
		if err := u.jobGone(step, ns); err != nil {
			return nil, err
		}
		if j := u.jobs[ns]; j.state == jobFinished {
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: job %s has finished: every process of it has ended", step, ns)
		}
	}
	for _, p := range pairs(nss) {
		u.conns[p]++
	}
	id := connectionID(nss)
	u.log.Debug().Str("connection", id).Msg("connect")
	return &plugin.ConnectResponse{ID: id}, nil
}

// Disconnect undoes one Connect of the jobs of req.Procs. It works after
// the jobs ended, so a process may disconnect from a job that finished.
// If a pair of the jobs is not connected (never, or every Connect was
// undone already), Disconnect changes nothing and fails with
// plugin.ErrNotFound naming the pairs. No info key is supported.
func (u *Universe) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	nss, step, err := connectJobs("disconnect", req.Procs)
	if err != nil {
		return err
	}
	if err := u.names.RefuseInfo(step, req.Info); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	ps := pairs(nss)
	var missing []string
	for _, p := range ps {
		if u.conns[p] == 0 {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return plugin.Errorf(plugin.ErrNotFound, "%s: jobs %s are not connected", step, strings.Join(missing, "; "))
	}
	for _, p := range ps {
		if u.conns[p]--; u.conns[p] == 0 {
			delete(u.conns, p)
		}
	}
	u.log.Debug().Str("connection", connectionID(nss)).Msg("disconnect")
	return nil
}

// dumpConnections writes one line per connected pair of jobs. Called with
// mu held.
func (u *Universe) dumpConnections(w io.Writer) {
	for _, p := range slices.SortedFunc(maps.Keys(u.conns), func(x, y jobPair) int {
		return cmp.Or(strings.Compare(x.a, y.a), strings.Compare(x.b, y.b))
	}) {
		fmt.Fprintf(w, "  jobs %s connected (%d connects not undone)\n", p, u.conns[p])
	}
}
