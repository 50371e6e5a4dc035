package daemon

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// crossFence is a fence across jobs of separately started runs of one
// user (Open MPI's disconnect after a connect across runs). Each run's
// universe calls once, when its own participants all arrived, with them
// as LocalProcs; the daemon counts every participant. Guarded by
// Server.mu; err and data are written before done closes.
type crossFence struct {
	key      string
	jobs     []string             // the runs' job keys (jobKey)
	timer    func() bool          // stops its time-out
	want     map[plugin.Proc]bool // every participant; true once arrived
	left     int                  // participants still to arrive
	data     []byte               // the runs' parts, in arrival order
	done     chan struct{}
	finished bool
	err      error
}

// Fence joins a fence whose participants are jobs of several runs of the
// caller's user, each registered here and running: it returns once every
// participant arrived (with Collect, the runs' parts concatenated), or
// fails at req.Timeout naming the jobs and ranks that never did. A run
// that calls twice with the same participants is counted once.
func (s *Server) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	p, err := s.caller(ctx, "fence")
	if err != nil {
		return nil, err
	}
	step := "fence " + req.ID
	// Users' job names are theirs: so are their fences.
	procs, set := plugin.ProcSet(req.Procs)
	var key strings.Builder
	key.WriteString(strconv.FormatUint(uint64(p.uid), 10) + "/" + set + "/" + req.ID)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, plugin.Errorf(plugin.ErrAborted, "%s: the node daemon is closing", step)
	}
	// The caller's participants: its run's, all of them fence's.
	for _, lp := range req.LocalProcs {
		j, err := s.jobOfLocked(step, p, lp)
		if err == nil {
			err = s.actsForLocked(ctx, step, j)
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	f := s.fences[key.String()]
	if f == nil {
		if f, err = s.newCrossFenceLocked(step, p, procs); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if s.fences == nil {
			s.fences = map[string]*crossFence{}
		}
		f.key = key.String()
		s.fences[f.key] = f
		timeout := req.TimeoutOrDefault()
		f.timer = s.crew.After(timeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.endFenceLocked(f, plugin.Errorf(plugin.ErrTimeout, "%s: %s did not arrive in %s", step, f.missing(), plugin.RoundDuration(timeout)))
		})
	}
	for _, lp := range req.LocalProcs {
		if _, ok := f.want[lp]; !ok {
			s.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: %s is not a participant", step, lp)
		}
	}
	fresh := false
	for _, lp := range req.LocalProcs {
		if !f.want[lp] {
			f.want[lp] = true
			f.left--
			fresh = true
		}
	}
	if fresh {
		f.data = append(f.data, req.Data...)
	}
	if f.left == 0 {
		s.endFenceLocked(f, nil)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, ctx.Err())
	}
	if f.err != nil {
		return nil, f.err
	}
	if !req.Collect {
		return &plugin.FenceResponse{}, nil
	}
	return &plugin.FenceResponse{Data: f.data}, nil
}

// newCrossFenceLocked expands procs over the registered jobs of p's user.
func (s *Server) newCrossFenceLocked(step string, p peer, procs []plugin.Proc) (*crossFence, error) {
	f := &crossFence{want: map[plugin.Proc]bool{}, done: make(chan struct{})}
	for _, pr := range procs {
		j, err := s.jobOfLocked(step, p, pr)
		if err != nil {
			return nil, err
		}
		if jk := jobKey(p.uid, pr.Nspace); !slices.Contains(f.jobs, jk) {
			f.jobs = append(f.jobs, jk)
		}
		if pr.Rank != plugin.RankWildcard {
			if pr.Rank < 0 || pr.Rank >= j.info.Size {
				return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s has no rank %d", step, pr.Nspace, pr.Rank)
			}
			f.want[pr] = false
			continue
		}
		for r := range j.info.Size {
			f.want[plugin.Proc{Nspace: pr.Nspace, Rank: r}] = false
		}
	}
	f.left = len(f.want)
	return f, nil
}

// endFenceLocked ends f with err (nil: complete) and forgets it.
func (s *Server) endFenceLocked(f *crossFence, err error) {
	if !f.finished {
		f.finished, f.err = true, err
		close(f.done)
	}
	if s.fences[f.key] == f {
		delete(s.fences, f.key)
	}
	if f.timer != nil {
		f.timer()
	}
}

// failFencesLocked ends the cross-run fences of job key jk (every one
// for ""), whose participants will never all arrive.
func (s *Server) failFencesLocked(jk string, err error) {
	for _, f := range s.fences {
		if jk == "" || slices.Contains(f.jobs, jk) {
			s.endFenceLocked(f, err)
		}
	}
}

// missing names the participants that never arrived, by job.
func (f *crossFence) missing() string {
	byJob := map[string][]int32{}
	var jobs []string
	for p, arrived := range f.want {
		if arrived {
			continue
		}
		if byJob[p.Nspace] == nil {
			jobs = append(jobs, p.Nspace)
		}
		byJob[p.Nspace] = append(byJob[p.Nspace], p.Rank)
	}
	slices.Sort(jobs)
	var out []string
	for _, ns := range jobs {
		slices.Sort(byJob[ns])
		out = append(out, fmt.Sprintf("job %s %s", ns, plugin.RankList(byJob[ns])))
	}
	return strings.Join(out, ", ")
}

// fenceGrace is how long a Client's Fence waits beyond the fence's time-out.
const fenceGrace = time.Second
