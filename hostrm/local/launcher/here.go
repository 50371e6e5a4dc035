package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/shim/serve"
)

// errStopped is why gopmi run stops a server it runs itself.
var errStopped = errors.New("gopmi run is ending the job")

// hereServer is a node served from this process: the shim's serving loop
// (package serve) on the tasks' connections, with the universe as its
// backend, called in-process: no shim, no backend process, no socket
// between them.
type hereServer struct {
	cancel context.CancelCauseFunc
}

func (h *hereServer) stop() { h.cancel(errStopped) }

// startHere serves one node's tasks from this process (on the starter's
// thread: it starts no process, and is quick). It takes the server ends
// of the node's sockets. The job's backend comes up when a request first
// needs it, as in a shim: most jobs on one node never need it.
func (l *Launcher) startHere(rj *runJob, s *nodeStart) error {
	ns, id := rj.spec.Job.Nspace, s.rn.node.ID
	index := 0
	for i, nd := range rj.spec.Job.Nodes {
		if nd.ID == id {
			index = i
		}
	}
	cfg, err := serve.NewConfig(l.bootstrap(rj.spec, index, rj.secret))
	if err != nil {
		return fmt.Errorf("job %s node %d: %w", ns, id, err)
	}
	conns := make(map[int32]net.Conn, len(s.servers))
	for i, f := range s.servers {
		if f == nil && rj.adopt != nil && s.rn.node.Ranks[i] == 0 {
			conns[0] = rj.adopt.served()
			continue
		}
		c, err := net.FileConn(f)
		f.Close()
		s.servers[i] = nil
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return fmt.Errorf("job %s node %d: rank %d's socket: %w", ns, id, s.rn.node.Ranks[i], err)
		}
		conns[s.rn.node.Ranks[i]] = c
	}
	port := s.port
	s.port = nil
	log := zerolog.New(l.logWriter()).Level(cfg.LogLevel).With().Timestamp().Logger()
	ctx, cancel := context.WithCancelCause(context.Background())
	h, err := l.host(ctx, cfg, conns, port, log)
	if err != nil {
		cancel(nil)
		return fmt.Errorf("job %s node %d: %w", ns, id, err)
	}
	l.mu.Lock()
	s.rn.here = &hereServer{cancel: cancel}
	rj.procs++
	if l.terminating() {
		s.rn.stop(syscall.SIGKILL)
	}
	l.mu.Unlock()
	go func() {
		err := h.Wait(ctx)
		h.Close()
		cancel(nil)
		code := serve.ExitCode(err)
		log.Debug().Err(err).Int("code", code).Msg("served")
		line := fmt.Sprintf("gopmi: PMI server for job %s node %d failed: %v", ns, id, err)
		l.serverEnded(rj, s.rn, code, fmt.Sprintf("ended with status %d", code), line)
	}()
	return nil
}

// host serves a node's tasks under the shim's host protocol
// (serve.Host), with what differs here: the backend is the universe,
// called in this process, as a shim's backend would register the job
// with it (a universe that cannot take the job fails it, as a shim whose
// backend does not start); there is no launcher to tell of readiness
// (gopmi run is its own), and no log of the backend's bring-up: the
// run's end line says why a job failed.
func (l *Launcher) host(ctx context.Context, cfg *serve.Config, conns map[int32]net.Conn, port net.Listener, log zerolog.Logger) (*serve.Hosted, error) {
	return serve.Host(ctx, cfg, serve.HostOptions{
		Conns:  conns,
		Port:   port,
		Logger: log,
		Name:   "gopmi run",
		Start: func(context.Context) (*serve.Started, error) {
			return &serve.Started{Backend: l.u}, nil
		},
	})
}

// logWriter is where a server here logs: stderr, as text unless
// GOPMI_LOG_FORMAT asks for JSON (as the shims gopmi run starts do), and
// silent while the run ends at the default log levels.
func (l *Launcher) logWriter() io.Writer {
	var w io.Writer = &tailWriter{w: l.out, quiet: &l.quiet}
	w = zerolog.SyncWriter(w)
	if f := os.Getenv("GOPMI_LOG_FORMAT"); f == "" || f == "console" {
		return zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}
	}
	return w
}
