package daemon

import (
	"context"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
)

// The daemon answers the contract's query vocabulary (plugin.Query*) with
// what the caller may see: its own jobs and names (root: everyone's). The
// keys about one job (its status, proc table, local peers, node list) are
// the run's to answer: the daemon asks the run's universe, as the
// universe answers them for `gopmi run` and a Slurm step, and answers from
// its registry only when the run no longer answers (it ended) or lives on
// another node. So `gopmi query` shows the same keys in the same format
// wherever the job runs.

// Bounds on one query: how many keys it may ask (the vocabulary has nine;
// a tool asks a few at once, of several jobs), and how big its answer may
// grow (every user's names, asked by root, are at most maxNames of each).
const (
	maxQueryKeys = 64
	maxAnswer    = 64 << 20
)

// nodeKeys are answered from the daemon's own state.
var nodeKeys = []string{plugin.QueryNamespaces, plugin.QueryJobs, plugin.QueryNames, plugin.QueryJobLog}

// jobKeys are a job's: the run's universe answers them.
var jobKeys = []string{plugin.QueryJobStatus, plugin.QueryProcTable, plugin.QueryLocalProcTable, plugin.QueryLocalPeers, plugin.QueryNodeList}

// Query answers the vocabulary's keys. A key it does not know, or about a
// job the caller may not see, is left out; a query none of whose keys
// could be answered is ErrNotFound, saying why.
func (s *Server) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	p, err := s.caller(ctx, "query")
	if err != nil {
		return nil, err
	}
	asked := 0
	for _, q := range req.Queries {
		asked += len(q.Keys)
	}
	if asked > maxQueryKeys {
		return nil, s.refuse(p, plugin.ErrInvalidArgument, "query: %d keys in one call; the node daemon answers %d at most", asked, maxQueryKeys)
	}
	resp := &plugin.QueryResponse{}
	var keys []string
	size := 0
	for _, q := range req.Queries {
		for _, k := range q.Keys {
			keys = append(keys, k)
			var v string
			var ok bool
			switch key := plugin.QueryKey(k); {
			case slices.Contains(nodeKeys, key):
				v, ok = s.answerNode(p, key, q.Qualifiers), true
			case slices.Contains(jobKeys, key):
				v, ok = s.answerJob(ctx, p, key, q.Qualifiers, req.Proc)
			}
			if ok {
				if size += len(k) + len(v); size > maxAnswer {
					return nil, s.refuse(p, plugin.ErrInvalidArgument, "query %s: the answer is over %d MiB, the most the node daemon sends; ask fewer keys, or of one job",
						strings.Join(keys, ","), maxAnswer>>20)
				}
				resp.Results = append(resp.Results, plugin.Info{Key: k, Value: v})
			}
		}
	}
	if len(resp.Results) > 0 {
		return resp, nil
	}
	if ns := nspaceOf(req, req.Proc); ns != "" {
		return nil, plugin.Errorf(plugin.ErrNotFound, "query %s: no job %s of %s is registered", strings.Join(keys, ","), ns, userName(p.uid))
	}
	return nil, plugin.Errorf(plugin.ErrNotFound, "query %s: not a key the node daemon answers (%s, %s)",
		strings.Join(keys, ","), strings.Join(nodeKeys, ", "), strings.Join(jobKeys, ", "))
}

// nspaceOf is the job the first query names, else who's.
func nspaceOf(req *plugin.QueryRequest, who plugin.Proc) string {
	if len(req.Queries) > 0 {
		if ns, ok := plugin.Qualifier(req.Queries[0].Qualifiers, plugin.QualNspace); ok {
			return ns
		}
	}
	return who.Nspace
}

// answerNode answers one of nodeKeys.
func (s *Server) answerNode(p peer, key string, quals []plugin.Info) string {
	if key == plugin.QueryNames {
		out := []plugin.NameInfo{}
		for _, n := range s.names.Names(func(n *names.Name) bool { return p.may(realmUID(n.Realm)) }) {
			out = append(out, plugin.NameInfo{Key: n.Key, Value: n.Value, Publisher: n.Publisher.String(), UID: realmUID(n.Realm), Run: n.Tag, Lasts: plugin.Lasts(n.Persist)})
		}
		return plugin.EncodeAnswer(out)
	}
	// What the answer holds is copied under the lock and encoded after
	// it: a user's query of her many jobs keeps no other call waiting.
	s.mu.Lock()
	s.pruneLocked(time.Now())
	jobs := []plugin.JobInfo{}
	for _, j := range s.jobs {
		if p.may(j.info.UID) {
			jobs = append(jobs, j.info)
		}
	}
	var logs []plugin.LogEntry
	if key == plugin.QueryJobLog {
		logs = []plugin.LogEntry{}
		if want, ok := plugin.Qualifier(quals, plugin.QualNspace); ok {
			for _, j := range s.jobsNamedLocked(p, want) {
				logs = append(logs, j.log...)
			}
		} else {
			for _, j := range s.jobs {
				if p.may(j.info.UID) {
					logs = append(logs, j.log...)
				}
			}
		}
	}
	s.mu.Unlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Started.Before(jobs[b].Started) })
	switch key {
	case plugin.QueryJobs:
		return plugin.EncodeAnswer(jobs)
	case plugin.QueryJobLog:
		sort.SliceStable(logs, func(a, b int) bool { return logs[a].Time.Before(logs[b].Time) })
		return plugin.EncodeAnswer(logs)
	}
	// The jobs that have not ended: PMIx's active namespaces (pps lists
	// them). An ended job stays an hour for gopmi ps -a and gopmi log.
	var ns []string
	for _, j := range jobs {
		if j.Ended.IsZero() {
			ns = append(ns, j.Nspace)
		}
	}
	return strings.Join(ns, ",")
}

// answerJob answers one of jobKeys about the job quals name (default
// who's): from the run's universe while it answers, else from the
// registry.
func (s *Server) answerJob(ctx context.Context, p peer, key string, given []plugin.Info, who plugin.Proc) (string, bool) {
	ns, ok := plugin.Qualifier(given, plugin.QualNspace)
	if !ok {
		ns = who.Nspace
	}
	here := p.node // the caller's node, the default of the local keys
	if here == "" {
		here, _ = os.Hostname()
	}
	// What the run is asked is rebuilt from what was checked: the job the
	// caller may see, and for the local keys one node.
	quals := []plugin.Info{{Key: plugin.QualNspace, Value: ns}}
	if key == plugin.QueryLocalPeers || key == plugin.QueryLocalProcTable {
		node := plugin.Info{Key: plugin.QualHostname, Value: here}
		if v, ok := plugin.Qualifier(given, plugin.QualNodeID); ok {
			node = plugin.Info{Key: plugin.QualNodeID, Value: v}
		} else if v, ok := plugin.Qualifier(given, plugin.QualHostname); ok {
			node.Value = v
		}
		quals = append(quals, node)
	}
	s.mu.Lock()
	var j *job
	for _, c := range s.jobsNamedLocked(p, ns) {
		if j == nil || c.info.Started.After(j.info.Started) {
			j = c
		}
	}
	if j == nil {
		s.mu.Unlock()
		return "", false
	}
	r := s.runs[j.info.Run]
	if r != nil && !r.ended && r.node == "" && r.universe != "" && j.info.State == running {
		c, addr, uid, pid := r.link, r.universe, r.uid, r.pid
		s.mu.Unlock()
		if v, err := s.askUniverse(ctx, r, c, addr, uid, pid, key, ns, quals); err == nil {
			return v, true
		} else {
			s.log.Debug().Err(err).Str("job", ns).Str("run", r.id).Msg("the run does not answer a query: answering from the registry")
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	return registryAnswer(j, key, quals)
}

// jobsNamedLocked are the jobs named ns that p may see: its own when it
// has any, so that a job another user registers under the name of p's
// (root's) answers none of p's questions about its own. Called with mu
// held.
func (s *Server) jobsNamedLocked(p peer, ns string) []*job {
	var own, others []*job
	for _, j := range s.jobs {
		switch {
		case j.info.Nspace != ns || !p.may(j.info.UID):
		case j.info.UID == p.uid:
			own = append(own, j)
		default:
			others = append(others, j)
		}
	}
	if len(own) > 0 {
		return own
	}
	return others
}

// askUniverse asks run r's universe one key about job ns.
func (s *Server) askUniverse(ctx context.Context, r *run, c *link.Conn, addr string, uid uint32, pid int, key, ns string, quals []plugin.Info) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.universeConn(ctx, r, c, addr, uid, pid)
	if err != nil {
		return "", err
	}
	resp, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{key}, Qualifiers: quals}}})
	if err != nil {
		return "", err
	}
	for _, res := range resp.Results {
		if res.Key == key {
			return res.Value, nil
		}
	}
	return "", plugin.Errorf(plugin.ErrNotFound, "query %s of job %s: the run's universe left it out", key, ns)
}

// registryAnswer answers one of jobKeys from what the run registered:
// the layout, the pids it knew, and the job's state. Called with mu held.
func registryAnswer(j *job, key string, quals []plugin.Info) (string, bool) {
	switch key {
	case plugin.QueryJobStatus:
		return j.info.State, true
	case plugin.QueryNodeList:
		return strings.Join(j.info.Nodes, ","), true
	}
	node := -1 // every node
	if key != plugin.QueryProcTable {
		node = slices.IndexFunc(j.nodes, func(n plugin.Node) bool {
			if v, ok := plugin.Qualifier(quals, plugin.QualNodeID); ok {
				return strconv.Itoa(int(n.ID)) == v
			}
			v, _ := plugin.Qualifier(quals, plugin.QualHostname)
			return n.Name == v
		})
		if node < 0 {
			return "", false
		}
	}
	procs := []plugin.ProcInfo{}
	for i, n := range j.nodes {
		if node >= 0 && i != node {
			continue
		}
		for _, r := range n.Ranks {
			pi := plugin.ProcInfo{Rank: r, Node: n.Name, State: plugin.ProcUnknown}
			if int(r) < len(j.info.Pids) {
				pi.PID = j.info.Pids[r]
			}
			procs = append(procs, pi)
		}
	}
	sort.Slice(procs, func(a, b int) bool { return procs[a].Rank < procs[b].Rank })
	if key == plugin.QueryLocalPeers {
		ranks := make([]int32, len(procs))
		for i, pi := range procs {
			ranks[i] = pi.Rank
		}
		return plugin.PeerList(ranks), true
	}
	return plugin.EncodeProcTable(procs), true
}

// qualifier is the value of key in qs (aliases count), else def.
func qualifier(qs []plugin.Info, key, def string) string {
	if v, ok := plugin.Qualifier(qs, plugin.QueryKey(key)); ok {
		return v
	}
	return def
}
