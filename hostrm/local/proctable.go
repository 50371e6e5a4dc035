package local

// The proc table: each task's state as its host and the launcher report it,
// and the universe's state for humans (Dump).

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
)

// setProcState updates the proc table. Called with mu held.
func (u *Universe) setProcState(step string, p plugin.Proc, state string) error {
	j, err := u.lookupProc(step, p)
	if err != nil {
		return err
	}
	j.procs[p.Rank].state = state
	return nil
}

// ClientConnected records that tasks initialized PMI.
func (u *Universe) ClientConnected(_ context.Context, req *plugin.ClientRequest) error {
	// A connect heard late (the PMIx face reports it apart from the
	// finalize) never takes a process back from finalized or ended.
	return u.setProcStates("client connected", req.Procs, "connected", "pending", "started")
}

// ClientFinalized records that tasks finalized PMI.
func (u *Universe) ClientFinalized(_ context.Context, req *plugin.ClientRequest) error {
	return u.setProcStates("client finalized", req.Procs, "finalized")
}

// setProcStates records state for every proc it knows and names the
// first one it does not.
// setProcStates records state for every proc it knows that is in one of
// the states from (any, when from is empty), and names the first one it
// does not know.
func (u *Universe) setProcStates(step string, procs []plugin.Proc, state string, from ...string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var first error
	for _, p := range procs {
		j, err := u.lookupProc(step, p)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if len(from) == 0 || slices.Contains(from, j.procs[p.Rank].state) {
			j.procs[p.Rank].state = state
		}
	}
	return first
}

// TaskStarted records a task's pid; the launcher calls it.
func (u *Universe) TaskStarted(p plugin.Proc, pid int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if j, err := u.lookupProc("task started", p); err == nil {
		j.procs[p.Rank].pid = pid
		if j.procs[p.Rank].state == "pending" {
			j.procs[p.Rank].state = "started"
		}
	}
}

// ProcState is p's state in the proc table ("pending", "started",
// "connected", "finalized", ...), "" for a process the universe does not
// know; the launcher asks it of a task that ended.
func (u *Universe) ProcState(p plugin.Proc) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	j, err := u.lookupProc("proc state", p)
	if err != nil {
		return ""
	}
	return j.procs[p.Rank].state
}

// TaskExited records how a task ended (e.g. "exited(0)", "signaled(TERM)")
// and drops the names it published with PersistProc; the launcher calls it.
func (u *Universe) TaskExited(p plugin.Proc, how string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if j, err := u.lookupProc("task exited", p); err == nil {
		j.procs[p.Rank].state = how
	}
	u.names.Drop(func(n *names.Name) bool { return n.Persist == plugin.PersistProc && n.Publisher == p })
}

// Dump writes the universe's state for humans (gopmi run's SIGUSR1).
func (u *Universe) Dump(w io.Writer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprintf(w, "gopmi: universe state at %s (up %s)\n", time.Now().Format(time.RFC3339), plugin.RoundDuration(time.Since(u.started)))
	for _, ns := range u.order {
		j := u.jobs[ns]
		counts := map[string]int{}
		for _, p := range j.procs {
			counts[procStateWord(p.state)]++
		}
		var cs []string
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			cs = append(cs, fmt.Sprintf("%s=%d", k, counts[k]))
		}
		status := j.state
		if j.detail != "" {
			status += " (" + j.detail + ")"
		}
		fmt.Fprintf(w, "  job %s: size %d, %d nodes (%d configured), %s; procs %s\n",
			ns, j.layout.Size, len(j.layout.Nodes), len(j.configured), status, strings.Join(cs, " "))
	}
	for _, key := range slices.Sorted(maps.Keys(u.fences)) {
		f := u.fences[key]
		if f.err != nil {
			fmt.Fprintf(w, "  fence %s of %s: failed: %v\n", f.id, strings.Join(f.nspaces, ","), f.err)
			continue
		}
		fmt.Fprintf(w, "  fence %s of %s: pending %s, %d/%d arrived, missing %s\n",
			f.id, strings.Join(f.nspaces, ","), plugin.RoundDuration(time.Since(f.start)), f.narrived, f.nexpected, u.missing(f, 10))
	}
	u.dumpConnections(w)
	fmt.Fprintf(w, "  %d published names\n", len(u.names.Names(nil)))
}

// procStateWord strips the detail from "exited(0)" for counting.
func procStateWord(s string) string {
	if i := strings.IndexByte(s, '('); i > 0 {
		return s[:i]
	}
	return s
}
