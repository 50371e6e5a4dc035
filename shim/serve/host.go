package serve

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
)

// The host protocol: what every host of the serving loop does around
// Start, once, here. gopmi-shim (package shim) and gopmi run serving a
// node itself (hostrm/local/launcher) both serve a job this way; what
// differs between them is in HostOptions (how the backend starts, how
// readiness is told) or stays theirs (reading the bootstrap, taking fds,
// signals, how the exit status is reported).
//
//  1. The tasks are served at once (Start), before the backend runs:
//     their local requests need none, and those that do wait for it.
//  2. The host says the tasks are served (Ready: sd_notify READY=1 for
//     the shim); a host that cannot say so fails the job at once, since
//     its launcher would wait for a readiness that is not coming.
//  3. The backend comes up beside the job: at once for a job on several
//     nodes (its fences need it) or when the bootstrap asks, otherwise
//     when a request first needs it, which a job on one node may never
//     do. Start and Configure share the bootstrap's backend start
//     time-out. A bring-up that fails fails the job; a backend that dies
//     during the job fails it too.
//  4. Wait serves until the job ends; Close then cuts short a bring-up
//     the job no longer needs and closes the backend.

// Started is a backend a host's HostOptions.Start brought up.
type Started struct {
	// Backend serves the job's calls.
	Backend plugin.Full
	// Info is what the backend said when it started (a plugin's
	// handshake), nil when it said nothing: Configure then asks GetInfo.
	Info *plugin.BackendInfo
	// Exited closes when the backend dies on its own, which fails the
	// job; nil for a backend that lives and dies with the host.
	Exited <-chan struct{}
	// Close ends the backend after the job; nil when there is nothing to
	// end.
	Close func() error
}

// HostOptions are what Host takes beyond the job's Config: the task
// connections, as for Start, and the host's own ways.
type HostOptions struct {
	// Conns, Port and Logger are Start's Options.
	Conns  map[int32]net.Conn
	Port   net.Listener
	Logger zerolog.Logger
	// Name says who serves, in the error of a backend start cut short
	// because the host stopped ("shim": "...: shim stopped: <cause>").
	Name string
	// Start starts the job's backend, within ctx: the backend start
	// time-out, cut short when the host stops or the job ends without
	// needing it. An error that does not wrap ErrBackend is wrapped.
	Start func(ctx context.Context) (*Started, error)
	// Ready, when set, tells the host's launcher that the tasks are
	// served; its error fails the job and Host returns it.
	Ready func() error
	// LogBackend logs the backend's bring-up ("backend serving") and its
	// failures as they happen. The shim does, its log being all a step
	// daemon shows; gopmi run does not, its end line says why a job
	// failed.
	LogBackend bool
}

// Hosted is a job served by Host: its server, with its backend brought
// up beside it.
type Hosted struct {
	srv  *Server
	log  zerolog.Logger // the backend's bring-up and failures, or Nop
	name string         // the backend's binary name
	done chan struct{}  // closed when the bring-up ended
	stop context.CancelFunc
	up   *Started // set before done closes, when the bring-up succeeded
}

// Host serves c's tasks (Start), tells the host's launcher (o.Ready) and
// brings the backend up beside the job (o.Start, then Configure and
// bridge.Backend.Up) as the job needs it. ctx ending stops the job, as
// for Wait. On an error nothing is left running.
func Host(ctx context.Context, c *Config, o HostOptions) (*Hosted, error) {
	name := c.Backend.BinaryName()
	demand := make(chan struct{})
	be := bridge.NewBackend(name, func() { close(demand) })
	if len(c.Job.Nodes) > 1 || c.Backend.StartAtOnce {
		be.Need()
	}
	srv, err := Start(ctx, c, Options{Backend: be, Conns: o.Conns, Port: o.Port, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	if o.Ready != nil {
		if err := o.Ready(); err != nil {
			be.Fail(err)
			srv.Fail(err)
			_ = srv.Wait(ctx)
			return nil, err
		}
	}
	h := &Hosted{srv: srv, log: zerolog.Nop(), name: name, done: make(chan struct{})}
	if o.LogBackend {
		h.log = o.Logger.With().Str("job", c.Job.Nspace).Int32("node", c.NodeID).Logger()
	}
	h.bringUpAside(ctx, c, o, be, demand)
	return h, nil
}

// Job is the served job's PMI engine.
func (h *Hosted) Job() *bridge.Job { return h.srv.Job() }

// Fail ends the job from outside, as Server.Fail.
func (h *Hosted) Fail(err error) { h.srv.Fail(err) }

// Reason says how the job ended, as Server.Reason.
func (h *Hosted) Reason() string { return h.srv.Reason() }

// Wait serves until the job ends, as Server.Wait; then call Close.
func (h *Hosted) Wait(ctx context.Context) error { return h.srv.Wait(ctx) }

// Close ends the backend's bring-up (or waits for it, within the backend
// start time-out it runs under) and closes the backend. Call it once the
// job is over and its news delivered (Wait returned): a bring-up still
// waiting or running is no longer needed.
func (h *Hosted) Close() {
	h.stop()
	<-h.done
	if h.up != nil && h.up.Close != nil {
		if err := h.up.Close(); err != nil {
			h.log.Warn().Err(err).Msg("close backend")
		}
	}
}

// bringUpAside brings the backend up on its own goroutine once the job
// asks for it (demand closes), and fails the job when the bring-up fails
// or the backend dies. A job that ends cleanly meanwhile cuts the start
// short; one that fails or aborts lets it finish, since the RM must hear
// of that.
func (h *Hosted) bringUpAside(ctx context.Context, c *Config, o HostOptions, be *bridge.Backend, demand <-chan struct{}) {
	job := h.srv.Job()
	startCtx, stop := context.WithCancel(ctx)
	h.stop = stop
	go func() {
		<-job.Done()
		if endedCleanly(job) {
			stop()
		}
	}()
	go func() {
		defer close(h.done)
		select {
		case <-demand:
		case <-startCtx.Done():
		}
		if startCtx.Err() != nil {
			be.Fail(errors.New("the job ended before it needed its backend"))
			return
		}
		st, err := h.bringUp(startCtx, c, o, be)
		if err != nil {
			be.Fail(err)
			if !endedCleanly(job) {
				h.log.Error().Err(err).Msg("failing the job: its backend did not start")
				job.Fail(err)
			}
			return
		}
		h.up = st
		go func() {
			select {
			case <-st.Exited:
				err := fmt.Errorf("%w: backend %s exited during the job: %w", ErrBackend, h.name, plugin.ErrBackendGone)
				h.log.Error().Err(err).Msg("failing the job")
				job.Fail(err)
			case <-job.Done():
			}
		}()
	}()
}

// bringUp starts and configures the backend, both within the backend
// start time-out, and hands it to be. startCtx cuts it short: the host
// stopping or a job that no longer needs the backend.
func (h *Hosted) bringUp(startCtx context.Context, c *Config, o HostOptions, be *bridge.Backend) (*Started, error) {
	ctx, cancel := context.WithTimeout(startCtx, c.BackendStart)
	defer cancel()
	st, err := o.Start(ctx)
	if err != nil {
		switch {
		case startCtx.Err() != nil:
			err = Stopped(startCtx, o.Name, "start "+h.name)
		case !errors.Is(err, ErrBackend):
			err = fmt.Errorf("%w: %w", ErrBackend, err)
		}
		return nil, err
	}
	info, attrs, err := Configure(ctx, st.Backend, st.Info, c)
	if err != nil {
		if st.Close != nil {
			if cerr := st.Close(); cerr != nil {
				h.log.Warn().Err(cerr).Msg("close backend")
			}
		}
		if startCtx.Err() != nil {
			err = Stopped(startCtx, o.Name, "configure "+h.name)
		}
		return nil, err
	}
	be.Up(st.Backend, info, attrs)
	h.log.Info().Int("tasks", len(c.Tasks)).Str("backend", h.name).Str("backend_version", info.Version).
		Msg("backend serving")
	return st, nil
}

// Stopped is the error for a start-up step cut short because the host
// stopped (ctx ended: a signal, gopmi run ending the job): the job failed
// before it began. host names who stopped ("shim").
func Stopped(ctx context.Context, host, step string) error {
	return fmt.Errorf("%w: %s: %s stopped: %w", ErrJobFailed, step, host, context.Cause(ctx))
}

// endedCleanly reports whether the job has ended with every task done.
func endedCleanly(job *bridge.Job) bool {
	select {
	case <-job.Done():
	default:
		return false
	}
	res := job.Result()
	return res.Err == nil && !res.Aborted
}
