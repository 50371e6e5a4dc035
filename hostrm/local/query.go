package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// Query answers the contract's query vocabulary (plugin.QueryNamespaces
// and the keys after it) about the run's jobs. A key it does not know, or
// whose qualifiers name no job or node, is left out, and a request none
// of whose keys could be answered is ErrNotFound. A query about a job of
// another run (pmix.nspace names no job of this one) goes to the node
// daemon (Beyond), which asks that run.
func (u *Universe) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	local, beyond := u.splitQueries(req)
	if len(beyond) == 0 {
		return u.query(req)
	}
	// Jobs of other runs: the node daemon asks their runs.
	resp, berr := u.opts.Beyond.Query(ctx, &plugin.QueryRequest{Proc: req.Proc, Queries: beyond})
	if berr == nil && resp == nil {
		resp = &plugin.QueryResponse{}
	}
	if len(local) == 0 {
		return resp, berr
	}
	mine, err := u.query(&plugin.QueryRequest{Proc: req.Proc, Queries: local})
	switch {
	case berr != nil && err != nil:
		return nil, berr
	case berr != nil:
		return mine, nil // what the run knows is an answer
	case err != nil:
		return resp, nil
	}
	resp.Results = append(mine.Results, resp.Results...)
	return resp, nil
}

// splitQueries separates the queries about jobs of other runs (a job
// qualifier the universe does not know, with a node daemon to ask) from
// the rest.
func (u *Universe) splitQueries(req *plugin.QueryRequest) (local, beyond []plugin.Query) {
	if u.opts.Beyond == nil {
		return req.Queries, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, q := range req.Queries {
		if ns, ok := plugin.Qualifier(q.Qualifiers, plugin.QualNspace); ok && u.jobs[ns] == nil {
			beyond = append(beyond, q)
		} else {
			local = append(local, q)
		}
	}
	return local, beyond
}

// query answers req from the universe alone.
func (u *Universe) query(req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	var namesHeld []names.Name
	if wantsNames(req) {
		namesHeld = u.names.Names(nil)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	resp := &plugin.QueryResponse{}
	var unknown []string
	for _, q := range req.Queries {
		for _, k := range q.Keys {
			v, ok := u.answer(plugin.QueryKey(k), q.Qualifiers, req.Proc, namesHeld)
			if !ok {
				unknown = append(unknown, k)
				continue
			}
			resp.Results = append(resp.Results, plugin.Info{Key: k, Value: v})
		}
	}
	if len(resp.Results) == 0 {
		return nil, plugin.Errorf(plugin.ErrNotFound, "query %s: nothing to answer", strings.Join(unknown, ","))
	}
	return resp, nil
}

// wantsNames reports whether req asks for the published names, which
// are read before the universe's lock is taken.
func wantsNames(req *plugin.QueryRequest) bool {
	for _, q := range req.Queries {
		if slices.ContainsFunc(q.Keys, func(k string) bool { return plugin.QueryKey(k) == plugin.QueryNames }) {
			return true
		}
	}
	return false
}

// answer computes one query value. Called with mu held.
func (u *Universe) answer(key string, quals []plugin.Info, who plugin.Proc, held []names.Name) (string, bool) {
	ns, ok := plugin.Qualifier(quals, plugin.QualNspace)
	if !ok {
		ns = who.Nspace
	}
	j := u.jobs[ns]
	switch key {
	case plugin.QueryNamespaces:
		return strings.Join(u.order, ","), true
	case plugin.QueryJobs:
		jobs := []plugin.JobInfo{}
		for _, n := range u.order {
			jobs = append(jobs, u.jobInfo(n))
		}
		return plugin.EncodeAnswer(jobs), true
	case plugin.QueryNames:
		out := []plugin.NameInfo{}
		uid := uint32(os.Getuid())
		for _, n := range held {
			out = append(out, plugin.NameInfo{Key: n.Key, Value: n.Value, Publisher: n.Publisher.String(), UID: uid, Run: u.opts.Prefix, Lasts: plugin.Lasts(n.Persist)})
		}
		return plugin.EncodeAnswer(out), true
	}
	if j == nil {
		return "", false
	}
	switch key {
	case plugin.QueryJobStatus:
		return plugin.JobStatus(plugin.JobState(j.state), j.detail), true
	case plugin.QueryProcTable:
		return plugin.EncodeProcTable(u.procTable(j, -1)), true
	case plugin.QueryNodeList:
		var ns []string
		for _, n := range j.layout.Nodes {
			ns = append(ns, n.Name)
		}
		return strings.Join(ns, ","), true
	case plugin.QueryLocalProcTable, plugin.QueryLocalPeers:
		i, ok := u.nodeOf(j, quals, who)
		if !ok {
			return "", false
		}
		if key == plugin.QueryLocalProcTable {
			return plugin.EncodeProcTable(u.procTable(j, i)), true
		}
		ranks := slices.Clone(j.layout.Nodes[i].Ranks)
		slices.Sort(ranks)
		return plugin.PeerList(ranks), true
	}
	return "", false
}

// nodeOf is the index in j's layout of the node quals name (by ID or
// name), else the requestor's node, else j's only node. Called with mu
// held.
func (u *Universe) nodeOf(j *job, quals []plugin.Info, who plugin.Proc) (int, bool) {
	if v, ok := plugin.Qualifier(quals, plugin.QualNodeID); ok {
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return 0, false
		}
		i, ok := j.nodeIndex[int32(id)]
		return i, ok
	}
	if v, ok := plugin.Qualifier(quals, plugin.QualHostname); ok {
		i := slices.IndexFunc(j.layout.Nodes, func(n plugin.Node) bool { return n.Name == v })
		return i, i >= 0
	}
	switch {
	case who.Nspace == j.layout.Nspace && who.Rank >= 0 && who.Rank < j.layout.Size:
		return j.nodeIndex[j.rankNode[who.Rank]], true
	case len(j.layout.Nodes) == 1:
		return 0, true
	}
	return 0, false
}

// procTable is j's processes by rank, those of node index node only when
// node >= 0. Called with mu held.
func (u *Universe) procTable(j *job, node int) []plugin.ProcInfo {
	apps := j.layout.AppRanks()
	procs := []plugin.ProcInfo{}
	for r, p := range j.procs {
		if node >= 0 && j.nodeIndex[j.rankNode[r]] != node {
			continue
		}
		pi := plugin.ProcInfo{Rank: int32(r), Node: j.nodeName(int32(r)), PID: p.pid, State: plugin.ProcState(p.state)}
		if a := int(apps[r]); a < len(j.layout.Apps) {
			pi.App = j.layout.Apps[a].Cmd
		}
		// The launcher says how a task ended as "exited(3)" or
		// "signaled(KILL)".
		word, detail, _ := strings.Cut(strings.TrimSuffix(p.state, ")"), "(")
		switch word {
		case "exited":
			pi.State = plugin.ProcExited
			pi.ExitStatus, _ = strconv.Atoi(detail)
		case "signaled":
			pi.State, pi.Signal = plugin.ProcExited, detail
			if sig := unix.SignalNum("SIG" + detail); sig != 0 {
				pi.ExitStatus = 128 + int(sig)
			}
		}
		procs = append(procs, pi)
	}
	return procs
}

// jobInfo is job ns as QueryJobs shows it. Called with mu held.
func (u *Universe) jobInfo(ns string) plugin.JobInfo {
	j := u.jobs[ns]
	uid := uint32(os.Getuid())
	info := plugin.JobInfo{Nspace: ns, Run: u.opts.Prefix, UID: uid, User: peercred.UserName(uid), PID: os.Getpid(), Size: j.layout.Size,
		State: plugin.JobStatus(plugin.JobState(j.state), j.detail), Started: u.started}
	if len(j.layout.Apps) > 0 {
		info.Cmd = j.layout.Apps[0].Cmd
	}
	for _, n := range j.layout.Nodes {
		info.Nodes = append(info.Nodes, n.Name)
	}
	for _, p := range j.procs {
		info.Pids = append(info.Pids, p.pid)
	}
	return info
}

// Log writes each datum to stderr as "gopmi: [<proc>] <value>"; data
// whose key is not a plain message key (stderr, stdout, msg, message or a
// PMIx pmix.log.* key) is written as key=value. Directives are ignored:
// there is only one destination.
func (u *Universe) Log(_ context.Context, req *plugin.LogRequest) error {
	var b strings.Builder
	for _, d := range req.Data {
		text := d.Value
		switch d.Key {
		case "", "stderr", "stdout", "msg", "message", "pmix.log.stderr", "pmix.log.stdout", "pmix.log.msg":
		default:
			text = d.Key + "=" + d.Value
		}
		for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
			fmt.Fprintf(&b, "gopmi: [%s] %s\n", req.Proc, l)
		}
	}
	u.outMu.Lock()
	defer u.outMu.Unlock()
	if _, err := io.WriteString(u.stderr, b.String()); err != nil {
		return plugin.Errorf(plugin.ErrUnavailable, "log: %v", err)
	}
	return nil
}

// NotifyEvent handles the events shims report. EventProcAborted (a task
// ended before finalize) fails the job: pending fences and waits of the
// job fail with ErrAborted and the launcher ends the run (OnProcFailed).
// EventProcTerminated marks the task and drops its PersistProc names.
// A client's event (EventClientPrefix) of a range wider than its node is
// kept for AwaitEvents. Other codes are accepted and ignored.
func (u *Universe) NotifyEvent(_ context.Context, req *plugin.EventRequest) error {
	if isClientEvent(req.Code) && req.Range != plugin.RangeLocal {
		u.mu.Lock()
		u.keepEvent(req)
		u.mu.Unlock()
		return nil
	}
	switch req.Code {
	case plugin.EventProcAborted:
		reason := eventReason(req.Info)
		u.mu.Lock()
		j, err := u.lookupProc("notify "+string(req.Code), req.Source)
		if err != nil {
			u.mu.Unlock()
			return err
		}
		if j.procs[req.Source.Rank].state == "failed" {
			// Told twice (a PMIx face and the launcher both saw it
			// leave): the first report acted.
			u.mu.Unlock()
			return nil
		}
		j.procs[req.Source.Rank].state = "failed"
		if j.state == jobRunning {
			j.state = jobFailed
			j.detail = fmt.Sprintf("rank %d: %s", req.Source.Rank, reason)
		}
		u.failFences(req.Source.Nspace, plugin.Errorf(plugin.ErrAborted, "job %s failed: rank %d: %s", req.Source.Nspace, req.Source.Rank, reason))
		u.broadcast()
		u.mu.Unlock()
		if u.opts.OnProcFailed != nil {
			u.opts.OnProcFailed(req.Source, reason)
		}
		return nil
	case plugin.EventProcTerminated:
		u.mu.Lock()
		defer u.mu.Unlock()
		if err := u.setProcState("notify "+string(req.Code), req.Source, "terminated"); err != nil {
			return err
		}
		u.names.Drop(func(n *names.Name) bool { return n.Persist == plugin.PersistProc && n.Publisher == req.Source })
		u.broadcast()
		return nil
	}
	// Like a PMIx server passing on events it does not act on, the
	// universe accepts other codes: nothing in the run subscribes to them.
	u.log.Debug().Str("code", string(req.Code)).Str("source", req.Source.String()).Msg("event ignored")
	return nil
}

// eventReason makes one line of an event's info.
func eventReason(info []plugin.Info) string {
	for _, k := range []string{"reason", "message", "msg", "error"} {
		if v, ok := plugin.Qualifier(info, k); ok && v != "" {
			return v
		}
	}
	var parts []string
	for _, in := range info {
		parts = append(parts, in.Key+"="+in.Value)
	}
	if len(parts) == 0 {
		return "ended before finalize"
	}
	return strings.Join(parts, " ")
}
