package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/wake"
)

// Options configure a step's coordinator.
type Options struct {
	// Listener is the socket to serve, when the caller made it (srun's
	// plugin does, so that the port is known before the coordinator
	// starts). Nil: listen on Listen.
	Listener net.Listener
	// Listen is the TCP address to listen on without a Listener; default
	// ":0" (every interface, a free port): the stepds reach it at srun's
	// address.
	Listen string
	// Secret is the step secret every node must prove.
	Secret string
	// Step is the Slurm step, "<jobid>.<stepid>", that an abort or a
	// failed task cancels; empty cancels nothing (tests).
	Step string
	// Cancel ends the step; default runs `scancel --signal=KILL <Step>`.
	Cancel func(ctx context.Context, step string) error
	// Ready is told the port once the coordinator listens.
	Ready func(port int)
	// Logger is for the coordinator's own lines.
	Logger zerolog.Logger
	// Version is reported by GetInfo.
	Version string
	// Srun is the srun a spawn runs; default "srun" from PATH.
	Srun string
	// FluxRun, when set, makes a spawn a Flux job of the instance
	// instead of a Slurm step: `FluxRun... -n N path args` (say, "flux",
	// "run", "-o", "pmi=gopmi"), which joins this coordinator as a
	// spawned step does. Flux's job shell sets it.
	FluxRun []string
	// Stdout and Stderr receive a spawned step's output (srun's own
	// streams); default the coordinator's.
	Stdout, Stderr io.Writer
	// Beyond, when set, is the node daemon of srun's node: the step's
	// names go there, shared with every gopmi run and step on the node
	// (local.UniverseOptions.Beyond). OnJob is told each job of the step
	// (the step's, then what it spawned) once its first node configured,
	// to register it with the daemon, and where the step serves its jobs
	// to the daemon (a private socket: other runs' connects to the step
	// and reads of its keys). It is called before any node's Configure
	// of the job returns, under the coordinator's lock: it must not
	// block.
	Beyond local.Beyond
	OnJob  func(job plugin.Job, universe string)
}

// Coordinator is the step-wide side of gopmi under Slurm: it runs in
// srun's process tree (srun's mpi/gopmi plugin starts gopmi-slurm
// coordinate) and serves the nodes at the top of the fence tree
// (slurm.Node) over an authenticated TCP link; every other node's calls
// reach it through them. The step-wide state (fences across the tree's
// top, the name service, connects, spawn, aborts, and the data of the
// nodes that departed) lives in one local.Universe; a job on several
// nodes keeps the rest of its data on its nodes.
type Coordinator struct {
	opts Options
	u    *local.Universe
	be   *stepBackend
	log  zerolog.Logger

	mu      sync.Mutex
	outcome outcome   // what srun should exit with, and why
	addr    string    // host:port the nodes reach us at, from their connections
	served  string    // where the universe is served to the node daemon; set before nodes connect
	changed wake.Cond // broadcast when a node configures: a spawn waits for its job's nodes
	spawned spawnedSteps
	jobs    stepJobs
	// crew runs the step's cancel after a failure and the kill of the
	// spawned steps' sruns that outlive their SIGTERM; Run closes it.
	crew *crew.Crew
}

// spawnedSteps are the steps the job spawned whose srun runs.
type spawnedSteps struct {
	wg    sync.WaitGroup
	sruns map[*exec.Cmd]bool // guarded by the coordinator's mu
}

// outcome is what srun should exit with: 0 while nothing failed, else
// the first abort's or failure's status, and why.
type outcome struct {
	status int
	why    string
}

// stepJobs are the jobs of the step (its own, and those it spawned), as
// the coordinator knows them.
type stepJobs struct {
	known map[string]bool // told to OnJob
	// readers read the data of the jobs on several nodes, which their
	// nodes hold (package slurm, modex.go), for readers outside them.
	readers map[string]*slurm.JobReader
}

// New returns a coordinator; Run serves it.
func New(opts Options) *Coordinator {
	if opts.Listen == "" {
		opts.Listen = ":0"
	}
	if opts.Cancel == nil {
		opts.Cancel = scancel
	}
	if opts.Srun == "" {
		opts.Srun = "srun"
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	c := &Coordinator{opts: opts, log: opts.Logger, crew: crew.New(nil)}
	// Spawned jobs are named after the step (slurm.<step>.<n>), or the
	// Flux job that spawned them (flux.<jobid>.<n>).
	prefix := "slurm." + opts.Step
	if opts.FluxRun != nil {
		prefix = "flux." + opts.Step
	}
	c.u = local.NewUniverse(local.UniverseOptions{
		Name:         "the step's coordinator",
		Prefix:       prefix,
		Version:      opts.Version,
		Logger:       opts.Logger,
		OnAbort:      c.aborted,
		OnProcFailed: c.procFailed,
		Launch:       c.launch,
		LayoutByRM:   true,
		Beyond:       opts.Beyond,
	})
	c.be = &stepBackend{Universe: c.u, c: c}
	return c
}

// stepBackend is the universe as the nodes see it: a Configure also
// wakes a spawn waiting for its job's nodes.
type stepBackend struct {
	*local.Universe
	c *Coordinator
}

// Fence reports a fence that timed out: the shims' own logs stay on their
// nodes, so this is where srun's user learns who never arrived. MPICH may
// go on after a failed barrier; the step ends instead, loudly.
func (b *stepBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	resp, err := b.Universe.Fence(ctx, req)
	if err != nil && errors.Is(err, plugin.ErrTimeout) {
		b.c.fail(1, err.Error())
	}
	return resp, err
}

func (b *stepBackend) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	cfg, err := slurm.ParseNodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	resp, err := b.Universe.Configure(ctx, req)
	b.c.changed.Broadcast()
	b.c.mu.Lock()
	first := err == nil && !b.c.jobs.known[req.Job.Nspace]
	if first {
		if b.c.jobs.known == nil {
			b.c.jobs.known = map[string]bool{}
		}
		b.c.jobs.known[req.Job.Nspace] = true
		if slurm.HoldsOwnData(req.Job) {
			if b.c.jobs.readers == nil {
				b.c.jobs.readers = map[string]*slurm.JobReader{}
			}
			b.c.jobs.readers[req.Job.Nspace] = slurm.NewJobReader(req.Job, b.c.opts.Secret, cfg.TreePorts)
		}
		// Told before any node's Configure returns: a node whose ranks
		// publish at once must find the job registered with the daemon
		// (it was refused as unknown when another node's Configure told
		// it after this lock). OnJob does not block (Client.Register).
		if b.c.opts.OnJob != nil {
			b.c.opts.OnJob(req.Job, b.c.served)
		}
	}
	b.c.mu.Unlock()
	return resp, err
}

// DirectModex reads a rank of a job on several nodes from the node that
// holds its data (the reader is outside that job: its own nodes read
// each other directly); other jobs' data is the universe's.
func (b *stepBackend) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	b.c.mu.Lock()
	r := b.c.jobs.readers[req.Proc.Nspace]
	b.c.mu.Unlock()
	if r == nil {
		return b.Universe.DirectModex(ctx, req)
	}
	return r.DirectModex(ctx, req)
}

// Depart keeps the data a node of a job on several nodes handed over as
// it ended (slurm.Node.Depart): its reader answers the node's ranks from
// it. A job on one node has nothing to hand over: the universe holds its
// data.
func (b *stepBackend) Depart(ctx context.Context, req *plugin.DepartRequest) error {
	if len(req.Procs) == 0 {
		return plugin.Errorf(plugin.ErrInvalidArgument, "depart of node %s: no processes", req.Node)
	}
	b.c.mu.Lock()
	r := b.c.jobs.readers[req.Procs[0].Nspace]
	b.c.mu.Unlock()
	if r == nil {
		return b.Universe.Depart(ctx, req)
	}
	return r.Depart(req)
}

// closeReaders closes the links the readers made.
func (c *Coordinator) closeReaders() {
	c.mu.Lock()
	rs := c.jobs.readers
	c.jobs.readers = nil
	c.mu.Unlock()
	for _, r := range rs {
		r.Close()
	}
}

// Backend is the coordinator's backend, for tests that call it directly.
func (c *Coordinator) Backend() plugin.Full { return c.be }

// Status is what srun should exit with: the status of the first abort
// (MPI_Abort's errorcode, as mpiexec reports it), 1 after a task failed,
// else 0.
func (c *Coordinator) Status() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outcome.status, c.outcome.why
}

// Run listens, reports the port and serves until ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	defer c.crew.Close()
	if c.opts.Secret == "" {
		return errors.New("coordinator: no step secret")
	}
	l := c.opts.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", c.opts.Listen); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	}
	al, err := slurm.AuthListener(l, c.opts.Secret, c.log)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	defer c.u.Close()
	defer c.closeReaders()
	if c.opts.OnJob != nil {
		// The node daemon relays other runs' connects to the step's jobs
		// and their reads of its keys here.
		if ul, addr, err := link.ListenPrivate("step-universe", c.log); err != nil {
			// The step runs; other runs cannot connect to it.
			c.log.Warn().Err(err).Msg("cannot serve the step to the node daemon: other runs cannot connect to its jobs")
		} else {
			c.served = addr
			sctx, stop := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() { served <- link.Serve(sctx, ul, c.be) }()
			defer func() {
				stop()
				if err := <-served; err != nil {
					c.log.Warn().Err(err).Msg("serving the step to the node daemon")
				}
			}()
		}
	}
	if c.opts.Ready != nil {
		c.opts.Ready(l.Addr().(*net.TCPAddr).Port)
	}
	// srun waits for the coordinator when the step ends: calls still in
	// flight then (a shim's last notice) get half a second.
	err = direct.Serve(ctx, addrListener{al, c}, c.be, direct.WithLogger(c.log), direct.WithGracePeriod(500*time.Millisecond))
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// WaitSpawned returns once every step this coordinator spawned has ended,
// or ctx has: the coordinator must serve them to their end, as mpiexec
// waits for the jobs its job spawned.
func (c *Coordinator) WaitSpawned(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		c.spawned.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// addrListener learns the address the nodes reach the coordinator at
// from their connections: a spawned step's nodes are told the same.
type addrListener struct {
	net.Listener
	c *Coordinator
}

func (l addrListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.c.mu.Lock()
		if l.c.addr == "" {
			l.c.addr = conn.LocalAddr().String()
		}
		l.c.mu.Unlock()
	}
	return conn, err
}

// cancelGrace is how long after an abort or a failed task the step is
// cancelled.
const cancelGrace = 300 * time.Millisecond

// exitStatus maps an MPI_Abort errorcode to an exit status: its low byte,
// unless that is 0, which would read as success.
func exitStatus(code int32) int {
	s := int(code) & 0xff
	if s == 0 {
		return 1
	}
	return s
}

func (c *Coordinator) aborted(ev local.AbortEvent) {
	why := fmt.Sprintf("rank %d of job %s called abort with status %d", ev.Proc.Rank, ev.Proc.Nspace, ev.Status)
	if ev.Message != "" {
		why += ": " + ev.Message
	}
	c.fail(exitStatus(ev.Status), why)
}

func (c *Coordinator) procFailed(p plugin.Proc, reason string) {
	c.fail(1, fmt.Sprintf("rank %d of job %s failed: %s", p.Rank, p.Nspace, reason))
}

// fail records the first failure and ends the step: an MPI job whose
// rank aborted or died would otherwise hang in its next fence.
func (c *Coordinator) fail(status int, why string) {
	c.mu.Lock()
	first := c.outcome.status == 0
	if first {
		c.outcome.status, c.outcome.why = status, why
	}
	c.mu.Unlock()
	if !first {
		return
	}
	// srun's user sees it now, on srun's stderr, and again when srun
	// exits.
	fmt.Fprintf(c.opts.Stderr, "gopmi: %s\n", why)
	if c.opts.Step == "" {
		c.stopSpawned()
		return
	}
	c.crew.Spawn(func(ctx context.Context) {
		// The ranks in PMI calls fail at once (the universe fails the
		// job's waits); the step's end is the backstop for the others.
		// It waits a moment, so that the aborting rank's last lines,
		// on their way from its node to srun, are not cut off.
		if !c.crew.Sleep(ctx, cancelGrace) {
			return // the coordinator is done: so is the step
		}
		c.stopSpawned()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.opts.Cancel(ctx, c.opts.Step); err != nil {
			c.log.Error().Err(err).Str("step", c.opts.Step).Msg("cancelling the step failed")
		}
	})
}

func scancel(ctx context.Context, step string) error {
	out, err := exec.CommandContext(ctx, "scancel", "--signal=KILL", step).CombinedOutput()
	if err != nil {
		return fmt.Errorf("scancel --signal=KILL %s: %w: %s", step, err, out)
	}
	return nil
}

// WriteEnd writes the line a host that ends the job itself reads (Flux's
// job shell, gopmi-slurm coordinate -end-fd): "end <status> <why>", the
// why on one line.
func WriteEnd(w io.Writer, status func() (int, string)) error {
	st, why := status()
	if st == 0 {
		st = 1
	}
	_, err := io.WriteString(w, "end "+strconv.Itoa(st)+" "+strings.ReplaceAll(why, "\n", " ")+"\n")
	return err
}

// WritePort writes the line srun's plugin reads: "port <n>".
func WritePort(w io.Writer, port int) error {
	_, err := io.WriteString(w, "port "+strconv.Itoa(port)+"\n")
	return err
}
