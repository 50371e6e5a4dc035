package daemon

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// maxLog bounds each job's log.
const maxLog = 200

// note appends an entry to j's log.
func (j *job) note(from, kind, msg string) {
	j.log = append(j.log, plugin.LogEntry{Time: time.Now(), Job: j.info.Nspace, User: j.info.User, From: from, Kind: kind, Msg: msg})
	if len(j.log) > maxLog {
		j.log = slices.Delete(j.log, 0, len(j.log)-maxLog)
	}
}

// Log keeps what a run says about one of its jobs (how it ended) in that
// job's log, for gopmi log.
func (s *Server) Log(ctx context.Context, req *plugin.LogRequest) error {
	p, err := s.caller(ctx, "log")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobOfLocked("log", p, req.Proc)
	if err != nil && !errors.Is(err, plugin.ErrAborted) {
		return err
	}
	if err := s.actsForLocked(ctx, "log", j); err != nil {
		return err
	}
	for _, d := range req.Data {
		j.note("run", d.Key, d.Value)
	}
	return nil
}
