package local

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// Query keys the universe answers, and the qualifiers they take. Values
// are text:
//
//   - "namespaces": every job of the run, comma-separated, in creation
//     order: "gopmi.812.0,gopmi.812.1".
//   - "job-status" (qualifier "nspace", default the requestor's job):
//     "running", "finished", or "aborted: <why>" / "failed: <why>".
//   - "proc-table" (qualifier "nspace", default the requestor's job): one
//     line per rank, "<rank> <node> <pid> <state>", lines joined by "\n";
//     pid is 0 until the task started; state is pending, started,
//     connected, finalized, terminated, aborted, failed, exited(<status>)
//     or signaled(<signal>).
//   - "local-peers" (qualifiers "nspace", default the requestor's job, and
//     "nodeid", default the requestor's node): the job's ranks on that
//     node, comma-separated: "0,1,2,3".
const (
	QueryNamespaces = "namespaces"
	QueryJobStatus  = "job-status"
	QueryProcTable  = "proc-table"
	QueryLocalPeers = "local-peers"

	QualNspace = "nspace"
	QualNodeID = "nodeid"
)

// Query answers the keys above; a key it does not know, or whose
// qualifiers name no job or node, is left out, and a request none of whose
// keys could be answered is ErrNotFound.
func (u *Universe) Query(_ context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	resp := &plugin.QueryResponse{}
	var unknown []string
	for _, q := range req.Queries {
		for _, k := range q.Keys {
			v, ok := u.answer(k, q.Qualifiers, req.Proc)
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

func qualifier(quals []plugin.Info, key string) (string, bool) {
	for _, q := range quals {
		if q.Key == key {
			return q.Value, true
		}
	}
	return "", false
}

// answer computes one query value. Called with mu held.
func (u *Universe) answer(key string, quals []plugin.Info, who plugin.Proc) (string, bool) {
	ns, ok := qualifier(quals, QualNspace)
	if !ok {
		ns = who.Nspace
	}
	switch key {
	case QueryNamespaces:
		return strings.Join(u.order, ","), true
	case QueryJobStatus:
		j := u.jobs[ns]
		if j == nil {
			return "", false
		}
		if j.detail != "" {
			return j.state + ": " + j.detail, true
		}
		return j.state, true
	case QueryProcTable:
		j := u.jobs[ns]
		if j == nil {
			return "", false
		}
		var b strings.Builder
		for r, p := range j.procs {
			if r > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "%d %s %d %s", r, j.nodeName(int32(r)), p.pid, p.state)
		}
		return b.String(), true
	case QueryLocalPeers:
		j := u.jobs[ns]
		if j == nil {
			return "", false
		}
		var node int32
		if v, ok := qualifier(quals, QualNodeID); ok {
			id, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return "", false
			}
			node = int32(id)
		} else if who.Nspace == ns && who.Rank >= 0 && who.Rank < j.layout.Size {
			node = j.rankNode[who.Rank]
		} else if len(j.layout.Nodes) == 1 {
			node = j.layout.Nodes[0].ID
		} else {
			return "", false
		}
		i, ok := j.nodeIndex[node]
		if !ok {
			return "", false
		}
		ranks := slices.Clone(j.layout.Nodes[i].Ranks)
		slices.Sort(ranks)
		return commaList(ranks), true
	}
	return "", false
}

// commaList formats ranks as local-peers does: "0,1,2,3".
func commaList(ranks []int32) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(int(r))
	}
	return strings.Join(s, ",")
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
// Other codes are accepted and ignored.
func (u *Universe) NotifyEvent(_ context.Context, req *plugin.EventRequest) error {
	switch req.Code {
	case plugin.EventProcAborted:
		reason := eventReason(req.Info)
		u.mu.Lock()
		j, err := u.lookupProc("notify "+string(req.Code), req.Source)
		if err != nil {
			u.mu.Unlock()
			return err
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
		u.dropNames(func(n *name) bool { return n.persist == plugin.PersistProc && n.publisher == req.Source })
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
		if v, ok := qualifier(info, k); ok && v != "" {
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
