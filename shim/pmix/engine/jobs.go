package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/gopmi/gopmi/plugin"
)

// jobs are the jobs the server knows: the ones it hosts ranks of, and
// others its clients reach (a spawn's, a connect's), with the names of
// the fences their processes make.
type jobs struct {
	mu     sync.Mutex
	hosted map[string]hostedJob // by namespace
	node   string               // the node's name, from the first job hosted
	others map[string]bool      // registered for what local clients read of them, hosted elsewhere
	fences map[string]int       // the sequence number of the next fence of each set of processes
	// handOvers counts the hand-overs of the clients' data, which every
	// node names apart.
	handOvers int
}

// hostedJob is what a fence of a hosted job needs: the node's name and
// its ranks.
type hostedJob struct {
	node  string
	ranks []int32
	multi bool // the job spans several nodes
}

func newJobs() *jobs {
	return &jobs{hosted: map[string]hostedJob{}, others: map[string]bool{}, fences: map[string]int{}}
}

// NodeRanks is node n's ranks in order: a node's local ranks are
// numbered so, for libpmix and for the fences.
func NodeRanks(n plugin.Node) []int32 { return slices.Sorted(slices.Values(n.Ranks)) }

// host records node index ni of job as this server's and returns its
// ranks (NodeRanks).
func (j *jobs) host(job plugin.Job, ni int) []int32 {
	local := NodeRanks(job.Nodes[ni])
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hosted[job.Nspace] = hostedJob{node: job.Nodes[ni].Name, ranks: local, multi: len(job.Nodes) > 1}
	if j.node == "" {
		j.node = job.Nodes[ni].Name
	}
	return local
}

// fence is the backend's request of a fence of procs: its ID, as every
// node's server names it (the set of processes, sorted and hashed, and how
// many fences of that set came before), and this node's part of it.
func (j *jobs) fence(procs []plugin.Proc) *plugin.FenceRequest {
	procs, text := plugin.ProcSet(procs)
	sum := sha256.Sum256([]byte(text))
	set := hex.EncodeToString(sum[:6])
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.fences[set]
	j.fences[set] = n + 1
	req := &plugin.FenceRequest{ID: "pmix:" + set + "/" + strconv.Itoa(n), Procs: procs}
	req.Node, req.LocalProcs = j.localLocked(procs)
	return req
}

// handOver is the ID of the next hand-over of procs' data, and their
// node.
func (j *jobs) handOver(procs []plugin.Proc) (id, node string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	node, _ = j.localLocked(procs)
	j.handOvers++
	return fmt.Sprintf("pmix:modex:%s/%d", node, j.handOvers), node
}

// local is the expansion of procs to this server's clients, and their
// node's name.
func (j *jobs) local(procs []plugin.Proc) (node string, local []plugin.Proc) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.localLocked(procs)
}

func (j *jobs) localLocked(procs []plugin.Proc) (node string, local []plugin.Proc) {
	for _, p := range procs {
		h, ok := j.hosted[p.Nspace]
		if !ok {
			continue
		}
		node = h.node
		for _, r := range h.ranks {
			if p.Rank == plugin.RankWildcard || p.Rank == r {
				local = append(local, plugin.Proc{Nspace: p.Nspace, Rank: r})
			}
		}
	}
	return node, local
}

// of is job nspace as this server hosts it.
func (j *jobs) of(nspace string) (hostedJob, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	h, ok := j.hosted[nspace]
	return h, ok
}

// nodeName is the node's name.
func (j *jobs) nodeName() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.node
}

// known reports whether libpmix knows job nspace (hosted or registered).
func (j *jobs) known(nspace string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.hosted[nspace]
	return ok || j.others[nspace]
}

// registered records another job as registered with libpmix.
func (j *jobs) registered(nspace string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.others[nspace] = true
}

// requestor names this server in requests that are no client's: the
// first local rank of a job it hosts.
func (j *jobs) requestor() plugin.Proc {
	j.mu.Lock()
	defer j.mu.Unlock()
	for ns, h := range j.hosted {
		if len(h.ranks) > 0 {
			return plugin.Proc{Nspace: ns, Rank: h.ranks[0]}
		}
	}
	return plugin.Proc{Rank: plugin.RankWildcard}
}

// nspaces lists the jobs of procs, once each.
func nspaces(procs []plugin.Proc) []string {
	var out []string
	for _, p := range procs {
		if !slices.Contains(out, p.Nspace) {
			out = append(out, p.Nspace)
		}
	}
	return out
}
