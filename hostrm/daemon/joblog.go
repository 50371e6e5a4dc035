package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Bounds of each job's log: its entries, their bytes, and one entry's
// text (the rest is cut, saying how much).
const (
	maxLog      = 200
	maxLogBytes = 64 << 10
	maxLogEntry = 4 << 10
)

// note appends an entry to j's log, the oldest going past its bounds.
func (j *job) note(from, kind, msg string) {
	msg = cut(msg, maxLogEntry)
	j.log = append(j.log, plugin.LogEntry{Time: time.Now(), Job: j.info.Nspace, User: j.info.User, From: from, Kind: kind, Msg: msg})
	j.logBytes += len(msg)
	drop := 0
	for len(j.log)-drop > maxLog || j.logBytes > maxLogBytes && len(j.log)-drop > 1 {
		j.logBytes -= len(j.log[drop].Msg)
		drop++
	}
	j.log = slices.Delete(j.log, 0, drop)
}

// cut is s, or its first max bytes and how many more there were.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes more)", strings.ToValidUTF8(s[:max], ""), len(s)-max)
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
