package launcher

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/pmix"
	"github.com/gopmi/gopmi/shim/serve"
)

// Open MPI with no flag, however it is started (python3 with mpi4py, a
// shell script, a program that does not show it links Open MPI): every
// node of a job gopmi run does not know to be PMIx gets a rendezvous, a
// TCP listener on 127.0.0.1, and every task the PMIx environment that
// points at it (pmix.RendezvousEnv) beside its PMI variables. A task that
// speaks PMI never looks at it; one that is a PMIx client connects, and
// waits for its handshake's answer while the node's PMIx server
// (gopmi-pmix) starts on that listener, libpmix accepting the
// connections queued there once the job is registered. A job of MPICH
// tasks costs the listener and a few variables: libpmix is never loaded.

// rendezvousFD names the rendezvous among a lazy PMIx server's inherited
// fds.
const rendezvousFD = "pmix-rendezvous"

// rendezvousOn reports whether jobs get a rendezvous: a run whose
// programs were not found to be Open MPI's (they get the PMIx face at
// once), PMIx not turned off ($GOPMI_PMIX=0), no PMI_PORT, no
// singleton. Its binaries are looked for at the first connection
// (rendezvousBinaries): an MPICH job does not stat them.
func (l *Launcher) rendezvousOn() bool {
	return l.cfg.PMIxAuto && l.face == faceFD && l.cfg.Singleton == nil
}

// rendezvousBinaries finds gopmi-pmix and gopmi-rm-local, once.
func (l *Launcher) rendezvousBinaries() error {
	l.univMu.Lock()
	defer l.univMu.Unlock()
	if l.pmixPath != "" {
		return nil
	}
	c := l.cfg
	self, _ := os.Executable()
	path, err := FindBinary(PMIxBinary, c.PMIxPath, EnvPMIxShim, self, "")
	if err != nil {
		return fmt.Errorf("%w: gopmi-pmix serves PMIx and is built where libpmix is (apt-get install libpmix-dev, then make install)", err)
	}
	if l.rmPath == "" {
		if l.rmPath, err = FindBinary(RMLocalBinary, c.RMPath, EnvRMLocal, self, path); err != nil {
			return err
		}
	}
	l.pmixPath = path
	return nil
}

// rendezvous is a node's PMIx rendezvous: its listening socket, made
// with the system calls and put in Go's poller as a file, which waits for
// its first connection without taking it (a net.Listener does not wait
// without accepting), and its address.
type rendezvous struct {
	f    *os.File
	addr *net.TCPAddr
}

// close ends the wait and closes the listener.
func (r *rendezvous) close() { r.f.Close() }

// listenRendezvous makes node s's rendezvous.
func (l *Launcher) listenRendezvous(rj *runJob, s *nodeStart) error {
	r, err := newRendezvous()
	if err != nil {
		return fmt.Errorf("job %s node %d: PMIx rendezvous: %w", rj.spec.Job.Nspace, s.rn.node.ID, err)
	}
	s.rdv = r
	l.mu.Lock()
	rj.rdvs = append(rj.rdvs, r)
	l.mu.Unlock()
	return nil
}

// newRendezvous listens on 127.0.0.1, a port the kernel picks.
func newRendezvous() (*rendezvous, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	got, err := unix.Getsockname(fd)
	in4, ok := got.(*unix.SockaddrInet4)
	if err != nil || !ok {
		unix.Close(fd)
		return nil, fmt.Errorf("getsockname: %v", err)
	}
	return &rendezvous{f: os.NewFile(uintptr(fd), rendezvousFD), addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: in4.Port}}, nil
}

// rendezvousEnv is what every task of node s gets for its PMIx server,
// but PMIX_RANK: the rendezvous, and the Open MPI settings a PMIx job's
// tasks get (startPMIxTasks), which other programs ignore.
func (l *Launcher) rendezvousEnv(rj *runJob, s *nodeStart) []string {
	env := pmix.RendezvousEnv(rj.spec.Job.Nspace, s.rn.node.ID, s.rdv.addr, l.cfg.Hostname)
	return append(l.openMPIDefaults(rj, s), env...)
}

// watchRendezvous waits for the first connection at node rn's rendezvous
// (without taking it) and starts the node's PMIx server on it; the
// rendezvous's close (every task ended, or the run) ends the wait.
func (l *Launcher) watchRendezvous(rj *runJob, rn *runNode, r *rendezvous) {
	raw, err := r.f.SyscallConn()
	if err != nil {
		return
	}
	ready := false
	err = raw.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		ready = n > 0
		return ready
	})
	if err != nil || !ready {
		return
	}
	l.startRendezvousServer(rj, rn, r)
}

// startRendezvousServer starts gopmi-pmix for node rn of rj on its
// rendezvous ln, as a second server of the node: its end counts as any
// server's, and it is told (SIGHUP) when every task ended.
func (l *Launcher) startRendezvousServer(rj *runJob, rn *runNode, r *rendezvous) {
	ns := rj.spec.Job.Nspace
	l.mu.Lock()
	if rj.ended || rj.running == 0 || l.terminating() {
		l.mu.Unlock()
		return
	}
	// Counted from now: the job cannot end before its server is.
	rj.procs++
	pn := &runNode{node: rn.node, exited: make(chan struct{})}
	rj.nodes = append(rj.nodes, pn)
	l.mu.Unlock()
	err := l.rendezvousBinaries()
	if err == nil {
		err = l.ensureUniverse()
	}
	if err == nil {
		index := nodeIndex(rj.spec.Job, rn.node.ID)
		spec := serverSpec{path: l.pmixPath, name: PMIxBinary, pmix: true, files: []*os.File{r.f}, names: []string{rendezvousFD},
			boot: func() *shimv1.Bootstrap { return l.rendezvousBootstrap(rj.spec, index) }}
		l.start.do(func() { err = l.startServer(rj, pn, spec) })
	}
	// The server holds the listener now, or nobody will: the clients
	// queued there are refused.
	l.mu.Lock()
	r.close()
	rj.procs--
	if err != nil {
		err = fmt.Errorf("job %s node %d: a task is a PMIx client, and its server did not start: %w", ns, rn.node.ID, err)
		pn.code, pn.how, pn.why = serve.ExitInternal, "did not start", "gopmi: "+err.Error()
		close(pn.exited)
		if rj.failure == "" {
			rj.failure = err.Error()
		}
		l.applyLocked(l.pol.serverExited(time.Now(), serverExit{code: pn.code, line: pn.why}))
	}
	l.checkJobLocked(rj)
	l.mu.Unlock()
	if err == nil {
		l.log.Debug().Str("job", ns).Int32("node", rn.node.ID).Msg("a PMIx client came to the rendezvous: its server started")
	}
}

// rendezvousBootstrap is the bootstrap of node index's lazy PMIx server:
// a PMIx job's (no task fds; its backend, the forwarder to the universe,
// which gopmi-pmix serves in its own process, up at once) that listens on
// the rendezvous.
func (l *Launcher) rendezvousBootstrap(spec *local.JobSpec, index int) *shimv1.Bootstrap {
	b := l.bootstrap(spec, index, "")
	for _, t := range b.Tasks {
		t.FdName = ""
	}
	b.Pmix, b.PmixRendezvousFd = true, rendezvousFD
	config, _ := json.Marshal(forwarder.Config{Universe: l.universeAddr()})
	b.Backend.Path, b.Backend.Config, b.Backend.Args = l.rmPath, string(config), []string{"-universe", l.universeAddr()}
	b.Backend.StartAtOnce = true
	return b
}

// closeRendezvous closes rj's rendezvous listeners: no task is left to
// come to them. Called with mu held.
func closeRendezvous(rj *runJob) {
	for _, r := range rj.rdvs {
		r.close()
	}
	rj.rdvs = nil
}

// lazyPMIxServed reports whether node's PMIx server was started at its
// rendezvous. Called with mu held.
func lazyPMIxServed(rj *runJob, node int32) bool {
	for _, n := range rj.nodes {
		if n.node.ID == node && n.shim != nil && n.shim.pmix {
			return true
		}
	}
	return false
}

// nodeOf is the id of the node rank r of rj runs on.
func (l *Launcher) nodeOf(rj *runJob, r int32) int32 {
	for _, n := range rj.spec.Job.Nodes {
		for _, x := range n.Ranks {
			if x == r {
				return n.ID
			}
		}
	}
	return -1
}
