package daemon

import (
	"context"
	"fmt"
	"slices"
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
	uid      uint32
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
	procs := slices.Clone(req.Procs)
	slices.SortFunc(procs, func(a, b plugin.Proc) int {
		if c := strings.Compare(a.Nspace, b.Nspace); c != 0 {
			return c
		}
		return int(a.Rank) - int(b.Rank)
	})
	var key strings.Builder
	for _, pr := range procs {
		key.WriteString(pr.String() + ";")
	}
	key.WriteString("/" + req.ID)

	s.mu.Lock()
	f := s.fences[key.String()]
	if f == nil {
		if f, err = s.newCrossFenceLocked(step, p, procs); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if s.fences == nil {
			s.fences = map[string]*crossFence{}
		}
		s.fences[key.String()] = f
		k := key.String()
		timeout := req.TimeoutOrDefault()
		s.tasks.after(timeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !f.finished {
				f.fail(plugin.Errorf(plugin.ErrTimeout, "%s: %s did not arrive in %s", step, f.missing(), plugin.RoundDuration(timeout)))
			}
			if s.fences[k] == f {
				delete(s.fences, k)
			}
		})
	}
	if f.uid != p.uid {
		s.mu.Unlock()
		return nil, plugin.Errorf(plugin.ErrPermission, "%s: another user's fence", step)
	}
	fresh := false
	for _, lp := range req.LocalProcs {
		if arrived, ok := f.want[lp]; ok && !arrived {
			f.want[lp] = true
			f.left--
			fresh = true
		} else if !ok {
			s.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: %s is not a participant", step, lp)
		}
	}
	if fresh {
		f.data = append(f.data, req.Data...)
	}
	if f.left == 0 && !f.finished {
		f.finished = true
		close(f.done)
		delete(s.fences, key.String())
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
	f := &crossFence{uid: p.uid, want: map[plugin.Proc]bool{}, done: make(chan struct{})}
	for _, pr := range procs {
		j, err := s.jobOfLocked(step, p, pr)
		if err != nil {
			return nil, err
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

func (f *crossFence) fail(err error) {
	if f.finished {
		return
	}
	f.finished, f.err = true, err
	close(f.done)
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
