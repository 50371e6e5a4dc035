package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/serve"
)

// PMIxFace serves a PMIx job's tasks on this node through libpmix: it
// registers the job with be as its backend and returns the environment
// the tasks need (the same for every rank but PMIX_RANK, which the step
// daemon adds), and wait, which returns once every local task finalized,
// ctx ended, or the face failed, after it stopped serving.
// node is the job's node this shim serves; fence bounds a fence whose
// clients gave no time-out (the shim's fence time-out).
// rendezvous, when set, is the listener the tasks were told to reach
// their server at before it existed (the bootstrap's
// pmix_rendezvous_fd): the face's server listens on it, and the face owns
// it.
type PMIxFace func(ctx context.Context, job plugin.Job, node int32, fence time.Duration, be plugin.Full, rendezvous *os.File, log zerolog.Logger) (env []string, wait func(context.Context) error, err error)

// errTasksEnded is a stop on SIGHUP: the step daemon saw every task of
// the node end.
var errTasksEnded = errors.New("every task ended (SIGHUP from the step daemon)")

// runPMIx is the shim of a PMIx job (bootstrap pmix): no task fds and no
// PMI engine; the backend is brought up at once, the face registers the
// job, and READY carries the tasks' environment (serve.PMIxEnv), since
// a PMIx client of a job its server has not registered is refused: its
// step daemon starts the tasks after READY.
func (s *server) runPMIx(ctx context.Context) error {
	c := s.cfg
	if s.rc.PMIx == nil {
		return fmt.Errorf("%w: job %s is a PMIx job, and this shim serves PMI-1 and PMI-2 only: gopmi-pmix (gopmi-slurm-pmix under Slurm) serves PMIx", serve.ErrUsage, c.Job.Nspace)
	}
	rendezvous, err := s.rendezvous()
	if err != nil {
		return err
	}
	if rendezvous != nil {
		defer rendezvous.Close()
	}
	path, err := s.backendBinary()
	if err != nil {
		return err
	}
	defer s.removeSocketDir()
	sctx, cancel := context.WithTimeout(ctx, c.BackendStart)
	st, err := s.startBackend(sctx, path)
	if err == nil {
		_, _, err = serve.Configure(sctx, st.Backend, st.Info, c)
		if err != nil && st.Close != nil {
			_ = st.Close()
		}
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return serve.Stopped(ctx, "shim", "start the backend")
		}
		return fmt.Errorf("%w: %w", serve.ErrBackend, err)
	}
	if st.Close != nil {
		defer func() {
			if err := st.Close(); err != nil {
				s.log.Warn().Err(err).Msg("close backend")
			}
		}()
	}
	// A backend that dies ends the face's wait.
	fctx, stopFace := context.WithCancelCause(ctx)
	defer stopFace(nil)
	if st.Exited != nil {
		go func() {
			select {
			case <-st.Exited:
				stopFace(fmt.Errorf("%w: the backend %s exited", serve.ErrBackend, c.Backend.BinaryName()))
			case <-fctx.Done():
			}
		}()
	}
	env, wait, err := s.rc.PMIx(fctx, c.Job, c.NodeID, c.Timeouts.Fence, st.Backend, rendezvous, s.log)
	if err != nil {
		return fmt.Errorf("%w: %w", serve.ErrJobFailed, err)
	}
	msg, err := serve.PMIxReady(len(c.Tasks), env)
	if err != nil {
		done, cancel := context.WithCancel(ctx)
		cancel()
		_ = wait(done)
		return fmt.Errorf("%w: %w", serve.ErrJobFailed, err)
	}
	if err := s.notify.send(msg); err != nil {
		// No task will start: the face stops at once.
		done, cancel := context.WithCancel(ctx)
		cancel()
		_ = wait(done)
		return fmt.Errorf("report readiness: %w", err)
	}
	s.ready = true
	s.log.Info().Int("tasks", len(c.Tasks)).Msg("serving PMIx")
	err = wait(fctx)
	if cause := context.Cause(fctx); err != nil && cause != nil && ctx.Err() == nil {
		err = cause
	}
	reason := "every PMIx task finalized"
	if errors.Is(err, errTasksEnded) || errors.Is(context.Cause(fctx), errTasksEnded) {
		// The tasks that never connected were no PMIx clients.
		err, reason = nil, "every task ended"
	}
	if err != nil {
		reason = err.Error()
		if errors.Is(err, plugin.ErrTimeout) {
			err = fmt.Errorf("%w: %w", serve.ErrJobFailed, err) // a fence timed out
		}
	}
	if nerr := s.notify.stopping(reason); nerr != nil {
		s.log.Debug().Err(nerr).Msg("report stopping")
	}
	return err
}

// rendezvous is the inherited listener the bootstrap's pmix_rendezvous_fd
// names, nil when it names none; every other inherited fd is closed.
func (s *server) rendezvous() (*os.File, error) {
	name := s.cfg.PMIxRendezvous
	if name == "" {
		return nil, nil
	}
	var files []*os.File
	var err error
	if s.rc.Files != nil {
		files, err = s.rc.Files()
	} else {
		files, err = inheritedFiles()
	}
	if err != nil {
		return nil, err
	}
	var found *os.File
	for _, f := range files {
		if f.Name() == name && found == nil {
			found = f
			continue
		}
		_ = f.Close()
	}
	if found == nil {
		return nil, fmt.Errorf("%w: pmix_rendezvous_fd %q: no such inherited fd (LISTEN_FDNAMES)", serve.ErrUsage, name)
	}
	return found, nil
}
