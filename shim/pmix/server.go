//go:build pmix

package pmix

/*
#cgo pkg-config: pmix hwloc
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/internal/loglines"
)

// Options configure a Server.
type Options struct {
	// Backend serves what crosses the node.
	Backend plugin.Full
	// TmpDir is the server's own directory (rendezvous files, the shared
	// data store); it is made if missing and should be private to the job.
	TmpDir string
	// DataDir, if set, holds the shared data store instead of TmpDir
	// (PMIX_DSTPATH): a directory in memory (tmpfs), where the clients'
	// and the server's page faults on the store's files cost no disk
	// blocks. It must exist.
	DataDir string
	// ID names the server to libpmix and its tools, unique on the node:
	// "gopmi.<job>.<node>".
	ID string
	// Tools lets PMIx tools (pps, plookup) attach to the server.
	Tools bool
	// FenceTimeout bounds a fence whose clients gave no PMIX_TIMEOUT;
	// default plugin.DefaultFenceTimeout.
	FenceTimeout time.Duration
	// Rendezvous, when set, is the listening TCP socket (127.0.0.1) the
	// clients were told to reach this server at (RendezvousEnv) before
	// it existed: libpmix listens on it instead of a socket of its own
	// (rendezvous.c), and accepts only once OpenGate (after the job's
	// registration). Start takes a copy; the caller closes its own.
	Rendezvous *os.File
	Logger     zerolog.Logger
}

// Server is a process's PMIx server.
type Server struct {
	opts Options
	be   plugin.Full
	log  zerolog.Logger
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	fences map[string]int // the sequence number of the next fence of each set of processes; guarded by mu
	dmodex dmodexWaits    // guarded by mu
	// others are the jobs registered for what local clients read of
	// them, hosted elsewhere; guarded by mu.
	others map[string]bool
	// published counts publishModex's fences, which every node names
	// apart; guarded by mu.
	published int
	jobs      map[string]*jobOnNode // the jobs registered, by namespace; guarded by mu
	node      string                // the node's name, from the first job registered; guarded by mu
	fin       finalizes             // guarded by mu
	refusing  loglines.Budget       // refused connections' lines; guarded by mu
	// connects holds, per client, what is closed once the backend heard
	// of its connect: its finalize is reported after. Guarded by mu.
	connects map[plugin.Proc]chan struct{}
	notices  notices        // guarded by mu
	calls    sync.WaitGroup // backend calls in flight; Close waits for them
	// lastCut and lastCutUID say when guard last cut another user's
	// connection, and whose; guarded by mu.
	lastCut    time.Time
	lastCutUID int
	// listening are libpmix's listening sockets, found at the first
	// guard; guarded by mu.
	listening []net.TCPAddr
	closed    bool // guarded by mu
	// failed is closed, failure set, once a fence bounded by the run's
	// time-out timed out: that ends the job (Face's wait), whatever its
	// clients do next. Guarded by mu.
	failed  chan struct{}
	failure error
}

// current is the process's server: libpmix's callbacks find it here.
// libpmix becomes a server once in a process's life: after its finalize,
// another init fails (it aborts the process), so started stays set.
var (
	startMu sync.Mutex // one Start at a time
	started bool       // guarded by startMu
	current atomic.Pointer[Server]
)

func status(rc C.int) error {
	if rc == C.PMIX_SUCCESS {
		return nil
	}
	return fmt.Errorf("%s (%d)", C.GoString(C.gopmi_error_string(rc)), int(rc))
}

// Start makes this process a PMIx server: PMIx_server_init with the
// server's own directory, ID and, with Tools, tool support.
func Start(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("pmix: no backend")
	}
	if opts.FenceTimeout <= 0 {
		opts.FenceTimeout = plugin.DefaultFenceTimeout
	}
	startMu.Lock()
	defer startMu.Unlock()
	if started {
		return nil, errors.New("pmix: this process already served PMIx: libpmix is a server once per process")
	}
	// libpmix writes to its clients' sockets without MSG_NOSIGNAL: one
	// that a client closed, or that guard cut, must give EPIPE, not
	// SIGPIPE, which would end the server (libpmix's threads are not
	// Go's, whose writes the runtime keeps from it).
	signal.Ignore(syscall.SIGPIPE)
	// libpmix's shared data store makes its files with a plain mkdir: the
	// directory must be there.
	if err := os.MkdirAll(opts.TmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("pmix: server directory: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{opts: opts, be: opts.Backend, log: opts.Logger, ctx: ctx, stop: stop, fences: map[string]int{}, jobs: map[string]*jobOnNode{}, connects: map[plugin.Proc]chan struct{}{}, failed: make(chan struct{}),
		refusing: loglines.Budget{PerSecond: refusalsPerSecond}}
	// Set before the init, without a lock held across it: a callback
	// that comes during the init finds the server.
	current.Store(s)
	started = true
	tmp, id, data := C.CString(opts.TmpDir), C.CString(opts.ID), C.CString(opts.DataDir)
	defer C.free(unsafe.Pointer(tmp))
	defer C.free(unsafe.Pointer(id))
	defer C.free(unsafe.Pointer(data))
	tools := C.int(0)
	if opts.Tools {
		tools = 1
	}
	if opts.Rendezvous != nil {
		fd, err := dupCloexec(opts.Rendezvous)
		if err != nil {
			current.Store(nil)
			stop()
			return nil, fmt.Errorf("pmix: rendezvous: %w", err)
		}
		C.gopmi_adopt_listener(C.int(fd))
	}
	if err := status(C.gopmi_server_init(tmp, data, id, tools)); err != nil {
		current.Store(nil)
		stop()
		C.gopmi_open_gate()
		return nil, fmt.Errorf("pmix: server init: %w", err)
	}
	if opts.Rendezvous != nil && C.gopmi_adopted() == 0 {
		// libpmix made no TCP listener: the clients would wait at the
		// rendezvous for ever.
		C.gopmi_server_finalize()
		current.Store(nil)
		stop()
		C.gopmi_open_gate()
		return nil, errors.New("pmix: server init: libpmix did not listen on the rendezvous (no TCP listener of its own was made)")
	}
	return s, nil
}

// OpenGate lets libpmix accept the clients waiting at the rendezvous:
// call it once their job is registered (a client of a job libpmix does not
// know is refused). Without a rendezvous it does nothing.
func (s *Server) OpenGate() { C.gopmi_open_gate() }

// dupCloexec is a close-on-exec copy of f's descriptor, in blocking mode
// as libpmix wants it until it sets its own.
func dupCloexec(f *os.File) (int, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(u uintptr) { fd, derr = unix.FcntlInt(u, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}

// Close fails nothing new, waits for the backend calls in flight (each
// bounded by its time-out) and finalizes libpmix, which removes its files.
func (s *Server) Close() error {
	return s.close(true)
}

// Leave is Close for a process that ends next: libpmix's server is left
// to the process's end instead of being finalized, once its event loop
// has sent what it queued. PMIx_server_finalize, stopping that loop while
// its answers to the last clients' finalize were still queued, closed
// their sockets before it deleted their write events, and libevent said
// "[warn] Epoll MOD(1) on fd N failed ... Bad file descriptor" on the
// server's stderr (6 Open MPI hellos in 40 under gopmi run -n 4); waiting
// for the clients to close their sockets first made every job's end wait
// for its tasks' exit (mpirun's server ends after its tasks). Its
// rendezvous files and data store are in directories the caller
// removes; the kernel closes the sockets.
func (s *Server) Leave() error {
	s.awaitFlushed()
	return s.close(false)
}

func (s *Server) close(finalize bool) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.calls.Wait()
	if !finalize {
		current.Store(nil)
		return nil
	}
	err := status(C.gopmi_server_finalize())
	current.Store(nil)
	if err != nil {
		return fmt.Errorf("pmix: server finalize: %w", err)
	}
	return nil
}

// jobOnNode is what a fence of a registered job needs: the node's name
// and its ranks.
type jobOnNode struct {
	node  string
	ranks []int32
	multi bool // the job spans several nodes
}

// RegisterJob registers job with libpmix as node's server sees it, and
// its ranks on node as clients of this user; it returns what each local
// rank's environment needs (PMIx_server_setup_fork: the namespace, rank,
// the server's address), by rank. A client of a job not registered is
// refused, so the tasks start after this.
func (s *Server) RegisterJob(job plugin.Job, node int32) (map[int32][]string, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	ni := slices.IndexFunc(job.Nodes, func(n plugin.Node) bool { return n.ID == node })
	if ni < 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "pmix: job %s has no node %d", job.Nspace, node)
	}
	local, err := s.registerNspace(job, ni)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.jobs[job.Nspace] = &jobOnNode{node: job.Nodes[ni].Name, ranks: local, multi: len(job.Nodes) > 1}
	if s.node == "" {
		s.node = job.Nodes[ni].Name
	}
	s.expectClients(job.Nspace, local)
	s.mu.Unlock()
	ns := C.CString(job.Nspace)
	defer C.free(unsafe.Pointer(ns))
	uid, gid := C.uint32_t(os.Getuid()), C.uint32_t(os.Getgid())
	envs := make(map[int32][]string, len(local))
	for _, r := range local {
		if err := status(C.gopmi_register_client(ns, C.uint32_t(r), uid, gid)); err != nil {
			return nil, fmt.Errorf("pmix: register rank %d of job %s: %w", r, job.Nspace, err)
		}
		var rc C.int
		env := C.gopmi_setup_fork(ns, C.uint32_t(r), &rc)
		if err := status(rc); err != nil {
			C.gopmi_free_env(env)
			return nil, fmt.Errorf("pmix: environment of rank %d of job %s: %w", r, job.Nspace, err)
		}
		envs[r] = goStrings(env)
		C.gopmi_free_env(env)
	}
	if len(job.Nodes) > 1 {
		// Clients on other nodes may read these clients' data by
		// direct modex, and raise events for them.
		s.watchCommits(job.Nspace, local)
		s.watchEvents(job.Nspace, job.Nodes[ni].Name)
	}
	return envs, nil
}

// registerNspace registers job's layout with libpmix, with the ranks of
// its node index ni as local (none for -1: another job's, which local
// clients reach after a spawn or a connect); it returns those ranks.
func (s *Server) registerNspace(job plugin.Job, ni int) ([]int32, error) {
	size := int(job.Size)
	localRank := make([]C.uint32_t, size)
	nodeID := make([]C.uint32_t, size)
	appnum := make([]C.uint32_t, size)
	var names, ppn []string
	for _, n := range job.Nodes {
		names = append(names, n.Name)
		ranks := slices.Clone(n.Ranks)
		slices.Sort(ranks)
		var rs []string
		for i, r := range ranks {
			localRank[r] = C.uint32_t(i)
			nodeID[r] = C.uint32_t(n.ID)
			rs = append(rs, strconv.Itoa(int(r)))
		}
		ppn = append(ppn, strings.Join(rs, ","))
	}
	for r, a := range job.AppRanks() {
		appnum[r] = C.uint32_t(a)
	}
	var local []int32
	if ni >= 0 {
		local = slices.Clone(job.Nodes[ni].Ranks)
		slices.Sort(local)
	}
	leader := C.uint32_t(0)
	if len(local) > 0 {
		leader = C.uint32_t(local[0])
	}
	ns := C.CString(job.Nspace)
	defer C.free(unsafe.Pointer(ns))
	cnodes, cppn, cpeers := C.CString(strings.Join(names, ",")), C.CString(strings.Join(ppn, ";")), C.CString(plugin.PeerList(local))
	defer C.free(unsafe.Pointer(cnodes))
	defer C.free(unsafe.Pointer(cppn))
	defer C.free(unsafe.Pointer(cpeers))
	univ := job.UniverseSize
	if univ < job.Size {
		univ = job.Size
	}
	apps := len(job.Apps)
	if apps == 0 {
		apps = 1
	}
	// The arrays stay Go memory, pinned while C reads them through the
	// job's struct (a Go pointer inside memory passed to C must be).
	var pin runtime.Pinner
	defer pin.Unpin()
	var zero C.uint32_t
	ptr := func(xs []C.uint32_t) *C.uint32_t {
		p := &zero
		if len(xs) > 0 {
			p = &xs[0]
		}
		pin.Pin(p)
		return p
	}
	// The node's hwloc topology, probed once per process (without I/O
	// devices: 3 ms on this VM; face_server.c): Open MPI otherwise probes the machine in each
	// rank, PCI bus included, which at 64 ranks on 2 nodes of 2 cores
	// doubled a hello's CPU time (1.5x the wall of Slurm's --mpi=pmix,
	// which hands its topology over too). nil: each rank probes.
	var topo *C.char
	if ni >= 0 {
		topo = C.gopmi_topology_xml()
		defer C.free(unsafe.Pointer(topo))
	}
	// Node rank and local rank are the same here: one job per server.
	cj := C.struct_gopmi_job{
		nspace: ns, nodes: cnodes, ppn: cppn,
		size: C.uint32_t(job.Size), univ_size: C.uint32_t(univ), num_nodes: C.uint32_t(len(job.Nodes)), num_apps: C.uint32_t(apps),
		local_peers: cpeers, nlocal: C.uint32_t(len(local)), local_leader: leader,
		nprocs: C.uint32_t(size), local_rank: ptr(localRank), node_rank: ptr(localRank), node_id: ptr(nodeID), appnum: ptr(appnum),
		topology: topo,
	}
	rc := C.gopmi_register_nspace(&cj)
	if err := status(rc); err != nil {
		return nil, fmt.Errorf("pmix: register job %s: %w", job.Nspace, err)
	}
	return local, nil
}

// goStrings copies a NULL-terminated C array of strings.
func goStrings(env **C.char) []string {
	var out []string
	if env == nil {
		return nil
	}
	for p := env; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}

// server is the process's Server, or nil once it closed.
func server() *Server {
	return current.Load()
}

// spawn runs f on a goroutine Close waits for; false once closing.
func (s *Server) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		f()
	}()
	return true
}

// procOf reads a libpmix process name.
func procOf(ns *C.char, rank C.uint32_t) plugin.Proc {
	r := int32(rank)
	if uint32(rank) == uint32(C.PMIX_RANK_WILDCARD) {
		r = plugin.RankWildcard
	}
	return plugin.Proc{Nspace: C.GoString(ns), Rank: r}
}

// procsOf reads libpmix's array of process names.
func procsOf(procs *C.pmix_proc_t, n C.size_t) []plugin.Proc {
	out := make([]plugin.Proc, 0, int(n))
	for _, p := range unsafe.Slice(procs, int(n)) {
		out = append(out, procOf(&p.nspace[0], C.uint32_t(p.rank)))
	}
	return out
}

// rcOf is the PMIx status for a backend's error.
func rcOf(err error) C.int {
	switch {
	case err == nil:
		return C.PMIX_SUCCESS
	case errors.Is(err, plugin.ErrTimeout):
		return C.PMIX_ERR_TIMEOUT
	case errors.Is(err, plugin.ErrNotFound):
		return C.PMIX_ERR_NOT_FOUND
	case errors.Is(err, plugin.ErrNotSupported):
		return C.PMIX_ERR_NOT_SUPPORTED
	case errors.Is(err, plugin.ErrPermission):
		return C.PMIX_ERR_NO_PERMISSIONS
	case errors.Is(err, plugin.ErrInvalidArgument):
		return C.PMIX_ERR_BAD_PARAM
	case errors.Is(err, plugin.ErrAborted):
		return C.PMIX_ERR_PROC_ABORTED
	}
	return C.PMIX_ERROR
}

// opCall runs f on the server's goroutine and answers libpmix's cbfunc
// with its error; it returns what the callback returns.
func (s *Server) opCall(what string, p plugin.Proc, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer, f func(ctx context.Context) error) C.int {
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, plugin.DefaultLookupTimeout)
		defer cancel()
		err := f(ctx)
		if err != nil {
			// A name not found is an answer; a failure is news.
			ev := s.log.Warn()
			if errors.Is(err, plugin.ErrNotFound) {
				ev = s.log.Debug()
			}
			ev.Err(err).Str("proc", p.String()).Msg("pmix: " + what)
		}
		C.gopmi_op_done(cbfunc, rcOf(err), cbdata)
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// flushWait bounds how long Leave waits for libpmix to send what it
// queued.
const flushWait = 100 * time.Millisecond

// awaitFlushed returns once libpmix's event loop wants to write to no
// connection (see leaving), or after flushWait.
func (s *Server) awaitFlushed() {
	deadline := time.Now().Add(flushWait)
	for pause := 50 * time.Microsecond; time.Now().Before(deadline); pause = min(2*pause, 2*time.Millisecond) {
		if w, err := pendingWrites("/proc/self/fd", "/proc/self/fdinfo"); err != nil || w == 0 {
			return
		}
		time.Sleep(pause)
	}
}
