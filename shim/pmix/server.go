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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
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
	"github.com/gopmi/gopmi/plugin/peercred"
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
	refusing  refusals              // guarded by mu
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
	s := &Server{opts: opts, be: opts.Backend, log: opts.Logger, ctx: ctx, stop: stop, fences: map[string]int{}, jobs: map[string]*jobOnNode{}, connects: map[plugin.Proc]chan struct{}{}, failed: make(chan struct{})}
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
	var zero C.uint32_t
	ptr := func(xs []C.uint32_t) *C.uint32_t {
		if len(xs) == 0 {
			return &zero
		}
		return &xs[0]
	}
	// The node's hwloc topology, probed once per process (without I/O
	// devices: 3 ms on this VM; face.c): Open MPI otherwise probes the machine in each
	// rank, PCI bus included, which at 64 ranks on 2 nodes of 2 cores
	// doubled a hello's CPU time (1.5x the wall of Slurm's --mpi=pmix,
	// which hands its topology over too). nil: each rank probes.
	var topo *C.char
	if ni >= 0 {
		topo = C.gopmi_topology_xml()
		defer C.free(unsafe.Pointer(topo))
	}
	// Node rank and local rank are the same here: one job per server.
	rc := C.gopmi_register_nspace(ns, cnodes, cppn, C.uint32_t(job.Size), C.uint32_t(univ), C.uint32_t(len(job.Nodes)), C.uint32_t(apps),
		cpeers, C.uint32_t(len(local)), leader, C.uint32_t(size), ptr(localRank), ptr(localRank), ptr(nodeID), ptr(appnum), topo)
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

//export goClientConnected
func goClientConnected(ns *C.char, rank C.uint32_t) {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return
	}
	reported := make(chan struct{})
	s.mu.Lock()
	s.connects[p] = reported
	s.mu.Unlock()
	s.notify(false, p, func() { close(reported) })
}

//export goClientFinalized
func goClientFinalized(ns *C.char, rank C.uint32_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	s.mu.Lock()
	connected := s.connects[p]
	delete(s.connects, p)
	s.mu.Unlock()
	// The client waits in PMIx_Finalize until the backend heard of its
	// finalize, after its connect: a task that ended after PMIx_Finalize
	// returned is never taken for one that left without it. Only then is
	// the finalize counted (the last one ends the server's wait).
	finalize := func(done func()) {
		if connected != nil {
			select {
			case <-connected:
			case <-time.After(5 * time.Second):
			}
		}
		if d, ok := s.be.(plugin.FinalizeDrainer); ok {
			// The backend passes other nodes' answers through this
			// process: the client exits only once they left.
			ctx, cancel := s.newsContext()
			d.DrainBeforeFinalize(ctx)
			cancel()
		}
		s.notify(true, p, func() {
			// The node's last client of a job on several nodes hands
			// the node's data over before it may exit (its server
			// ends with it), as the PMI face does (bridge).
			s.departIfLast(p)
			s.finalized(p)
			done()
		})
	}
	ok := s.spawn(func() {
		finalize(func() {
			// The client's finalize succeeds whatever the backend said:
			// it is done with PMIx either way.
			C.gopmi_op_done(cbfunc, C.PMIX_SUCCESS, cbdata)
		})
	})
	if !ok {
		finalize(func() {}) // the server is closing: still heard, bounded
		return C.PMIX_OPERATION_SUCCEEDED
	}
	if cbfunc == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	return C.PMIX_SUCCESS
}

// goClientLost: a client's connection closed before PMIx_Finalize (the
// task died, or exited without it). Under a step daemon that is not the
// shim's parent (slurmstepd) nothing else sees it, and its job would wait
// in its next fence until the time-out: the backend hears of it as a
// failed process, as a PMI task's closed fd is reported.
//
//export goClientLost
func goClientLost(ns *C.char, rank C.uint32_t, st C.int) {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return
	}
	s.mu.Lock()
	_, ours := s.jobs[p.Nspace]
	s.mu.Unlock()
	if !ours || p.Rank == plugin.RankWildcard {
		return
	}
	why := C.GoString(C.gopmi_error_string(st))
	s.mu.Lock()
	if time.Since(s.lastCut) < cutRecent {
		why += fmt.Sprintf("; perhaps it was another user's connection, claiming this rank, that the server refused and cut (uid %d)", s.lastCutUID)
	}
	s.mu.Unlock()
	lost := func() {
		ctx, cancel := s.newsContext()
		defer cancel()
		err := s.be.NotifyEvent(ctx, &plugin.EventRequest{Code: plugin.EventProcAborted, Source: p,
			Info: []plugin.Info{{Key: "reason", Value: "ended before PMIx_Finalize (its PMIx connection closed: " + why + ")"}}})
		if err != nil {
			s.log.Warn().Err(err).Str("proc", p.String()).Msg("pmix: report a client that left before PMIx_Finalize")
		}
	}
	if !s.spawn(lost) {
		lost() // the server is closing: still heard, bounded
	}
}

// newsBound bounds a call that tells the backend something it must hear
// (a finalize, a client lost, the end of a failed spawn's job).
const newsBound = 5 * time.Second

// newsContext is such a call's context: it outlives the server's own
// (news comes also while the server closes), within newsBound.
func (s *Server) newsContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.ctx), newsBound)
}

//export goAbort
func goAbort(ns *C.char, rank C.uint32_t, st C.int, msg *C.char, procs *C.pmix_proc_t, nprocs C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.AbortRequest{Proc: procOf(ns, rank), Status: int32(st), Message: C.GoString(msg)}
	if err := s.guard("abort"); err != nil {
		return rcOf(err)
	}
	if nprocs > 0 {
		req.Targets = procsOf(procs, nprocs)
	}
	return s.opCall("abort", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Abort(ctx, req) })
}

// fence makes the backend's request of a fence of procs: its ID, as every
// node's server names it (the set of processes, sorted and hashed, and how
// many fences of that set came before), and this node's part of it.
func (s *Server) fence(procs []plugin.Proc) *plugin.FenceRequest {
	procs, text := plugin.ProcSet(procs)
	sum := sha256.Sum256([]byte(text))
	set := hex.EncodeToString(sum[:6])
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.fences[set]
	s.fences[set] = n + 1
	req := &plugin.FenceRequest{ID: "pmix:" + set + "/" + strconv.Itoa(n), Procs: procs}
	req.Node, req.LocalProcs = s.localProcsLocked(procs)
	return req
}

// localProcsLocked is the expansion of procs to this server's clients,
// and their node's name. Called with mu held.
func (s *Server) localProcsLocked(procs []plugin.Proc) (node string, local []plugin.Proc) {
	for _, p := range procs {
		j := s.jobs[p.Nspace]
		if j == nil {
			continue
		}
		node = j.node
		for _, r := range j.ranks {
			if p.Rank == plugin.RankWildcard || p.Rank == r {
				local = append(local, plugin.Proc{Nspace: p.Nspace, Rank: r})
			}
		}
	}
	return node, local
}

//export goFence
func goFence(procs *C.pmix_proc_t, nprocs C.size_t, collect C.int, timeout C.int, local C.int, data *C.char, ndata C.size_t, cbfunc C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := s.fence(procsOf(procs, nprocs))
	if local != C.PMIX_SUCCESS {
		return local
	}
	req.Collect, req.Timeout = collect != 0, s.opts.FenceTimeout
	if timeout > 0 {
		req.Timeout = time.Duration(timeout) * time.Second
	}
	var part []byte
	if collect != 0 {
		// The node's part: libpmix's blob, framed (frames.go), copied
		// once (libpmix keeps its buffer).
		var blob []byte
		if ndata > 0 {
			blob = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(ndata))
		}
		part = appendFrame(make([]byte, 0, frameSize("", len(blob))), frameFence, "", 0, blob)
	}
	s.markFenced(req)
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.Timeout+5*time.Second)
		defer cancel()
		if req.Collect {
			req.Data = part
		} else {
			// A fence that collects nothing (PMIx_Fence without
			// PMIX_COLLECT_DATA) leaves each process's data where it
			// is: a client on another node gets it by direct modex,
			// which the backend answers from the fences' parts. So
			// the node's part is the newest data of its clients that
			// committed any (libpmix answers for them at once), where
			// it changed since it was last handed over.
			s.mu.Lock()
			committed := s.committedLocked(req.LocalProcs)
			s.mu.Unlock()
			req.Data = s.dmodexFrames(ctx, committed, nil, true)
		}
		resp, err := s.be.Fence(ctx, req)
		var frames []frame
		if err == nil && req.Collect {
			frames, err = parseFrames(resp.Data)
		}
		if err != nil {
			s.log.Warn().Err(err).Str("fence", req.ID).Msg("pmix: fence")
			C.gopmi_modex_done(cbfunc, rcOf(err), nil, 0, cbdata)
			if timeout <= 0 && errors.Is(err, plugin.ErrTimeout) {
				// The run's time-out, not one the clients chose
				// (PMIX_TIMEOUT, theirs to handle): the job ends.
				s.fail(err)
			}
			return
		}
		// libpmix gets the fence blobs, concatenated, in memory of its
		// own (it frees it), copied there once.
		cout, n := fenceBlobsC(frames)
		C.gopmi_modex_done(cbfunc, C.PMIX_SUCCESS, cout, C.size_t(n), cbdata)
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// fail ends the job for err, once (failed).
func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		close(s.failed)
	}
}

// fenceBlobsC is fenceBlobs in C memory, which libpmix frees: nil when
// there is none.
func fenceBlobsC(frames []frame) (*C.char, int) {
	var buf unsafe.Pointer
	out := fenceBlobs(frames, func(n int) []byte {
		buf = C.malloc(C.size_t(n))
		return unsafe.Slice((*byte)(buf), n)
	})
	return (*C.char)(buf), len(out)
}

// rangeOf maps a PMIx data range (-1: none given) onto the contract's.
func rangeOf(r C.int) (plugin.Range, error) {
	switch r {
	case -1, C.PMIX_RANGE_UNDEF:
		return plugin.RangeDefault, nil
	case C.PMIX_RANGE_LOCAL:
		return plugin.RangeLocal, nil
	case C.PMIX_RANGE_NAMESPACE:
		return plugin.RangeNamespace, nil
	case C.PMIX_RANGE_SESSION:
		return plugin.RangeSession, nil
	case C.PMIX_RANGE_GLOBAL:
		return plugin.RangeGlobal, nil
	}
	return 0, plugin.Errorf(plugin.ErrNotSupported, "PMIx data range %d is not supported (local, namespace, session and global are)", int(r))
}

// persistenceOf maps a PMIx persistence (-1: none given) onto the
// contract's.
func persistenceOf(p C.int) (plugin.Persistence, error) {
	switch p {
	case -1:
		return plugin.PersistDefault, nil
	case C.PMIX_PERSIST_INDEF:
		return plugin.PersistIndefinite, nil
	case C.PMIX_PERSIST_FIRST_READ:
		return plugin.PersistFirstRead, nil
	case C.PMIX_PERSIST_PROC:
		return plugin.PersistProc, nil
	case C.PMIX_PERSIST_APP:
		return plugin.PersistApp, nil
	case C.PMIX_PERSIST_SESSION:
		return plugin.PersistSession, nil
	}
	return 0, plugin.Errorf(plugin.ErrNotSupported, "PMIx persistence %d is not supported", int(p))
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

//export goRefuse
func goRefuse(ns *C.char, rank C.uint32_t, key *C.char, typ C.uint16_t) C.int {
	if s := server(); s != nil {
		s.log.Warn().Str("proc", procOf(ns, rank).String()).Str("key", C.GoString(key)).Int("type", int(typ)).
			Msg("pmix: publish of a value libpmix cannot pack refused")
	}
	return C.PMIX_ERR_NOT_SUPPORTED
}

//export goPublish
func goPublish(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, rng, persist C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.PublishRequest{Proc: procOf(ns, rank)}
	if err := s.guard("publish"); err != nil {
		return rcOf(err)
	}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	for i := range ks {
		req.Data = append(req.Data, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	var err error
	if req.Range, err = rangeOf(rng); err == nil {
		req.Persistence, err = persistenceOf(persist)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("proc", req.Proc.String()).Msg("pmix: publish")
		return rcOf(err)
	}
	return s.opCall("publish", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Publish(ctx, req) })
}

//export goUnpublish
func goUnpublish(ns *C.char, rank C.uint32_t, keys **C.char, rng C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.UnpublishRequest{Proc: procOf(ns, rank), Keys: goStrings(keys)}
	err := s.guard("unpublish")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	return s.opCall("unpublish", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Unpublish(ctx, req) })
}

//export goLookup
func goLookup(ns *C.char, rank C.uint32_t, keys **C.char, rng, wait, timeout C.int, cbfunc C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	// PMIX_WAIT (how many values, 0: all; a bool true reads 0) makes the
	// lookup wait for every key; absent or false (-1), it does not.
	req := &plugin.LookupRequest{Proc: procOf(ns, rank), Keys: goStrings(keys), Wait: wait >= 0}
	if timeout > 0 {
		req.Timeout = time.Duration(timeout) * time.Second
	}
	err := s.guard("lookup")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.TimeoutOrDefault()+5*time.Second)
		defer cancel()
		resp, err := s.be.Lookup(ctx, req)
		if err != nil {
			s.log.Debug().Err(err).Str("proc", req.Proc.String()).Msg("pmix: lookup")
			C.gopmi_lookup_done(cbfunc, rcOf(err), 0, nil, nil, nil, nil, cbdata)
			return
		}
		n := len(resp.Data)
		nss := cArray(n)
		ks, vs := cArray(n), cArray(n)
		ranks := (*C.uint32_t)(C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(C.uint32_t(0)))))
		rs := unsafe.Slice(ranks, max(n, 1))
		for i, d := range resp.Data {
			nss.set(i, d.Publisher.Nspace)
			ks.set(i, d.Key)
			vs.set(i, d.Value)
			r := uint32(d.Publisher.Rank)
			if d.Publisher.Rank == plugin.RankWildcard {
				r = uint32(C.PMIX_RANK_WILDCARD)
			}
			rs[i] = C.uint32_t(r)
		}
		C.gopmi_lookup_done(cbfunc, C.PMIX_SUCCESS, C.size_t(n), nss.p, ranks, ks.p, vs.p, cbdata)
		nss.free()
		ks.free()
		vs.free()
		C.free(unsafe.Pointer(ranks))
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// cStrs is a C array of C strings the Go side made and frees.
type cStrs struct {
	p **C.char
	n int
}

func cArray(n int) cStrs {
	return cStrs{p: (**C.char)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof((*C.char)(nil))))), n: n}
}

func (a cStrs) set(i int, v string) { unsafe.Slice(a.p, a.n)[i] = C.CString(v) }

func (a cStrs) free() {
	for _, p := range unsafe.Slice(a.p, a.n) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(a.p))
}

// toolRanks numbers the tools that connected to this process's server.
var toolRanks atomic.Uint32

// goToolConnect numbers a tool that connects. It refuses none: libpmix,
// refused a tool or failing to answer it, closes its socket twice and
// may stop listening. Another user's tool is refused its calls (guard).
//
//export goToolConnect
func goToolConnect() C.uint32_t {
	n := toolRanks.Add(1) - 1
	if s := server(); s != nil {
		s.log.Debug().Uint32("rank", n).Msg("pmix: a tool connected")
	}
	return C.uint32_t(n)
}

// cutRecent is how long after a cut connection a client's loss is said to
// be perhaps that connection's.
const cutRecent = 10 * time.Second

// cutAfter is how long guard lets a refused call's answer go out before
// it cuts the caller's connection: libpmix cannot tell the caller that
// its connection is gone, so a tool cut before its answer would wait for
// ever.
const cutAfter = 200 * time.Millisecond

// listeningSockets are libpmix's listening sockets, read once: libpmix
// makes its listener at its init.
func (s *Server) listeningSockets() ([]net.TCPAddr, error) {
	s.mu.Lock()
	listening := s.listening
	s.mu.Unlock()
	if listening != nil {
		return listening, nil
	}
	listening, err := listeners("/proc/self/net", "/proc/self/fd")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.listening = listening
	s.mu.Unlock()
	return listening, nil
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

// handshakeWait bounds how long a connection may say nothing before
// libpmix reads it (vetPeer): a client sends its handshake as it
// connects.
const handshakeWait = time.Second

// goVetPeer judges a connection libpmix's listener accepted, before
// libpmix reads a byte of it (rendezvous.c's accept): 1 to serve it.
//
//export goVetPeer
func goVetPeer(fd C.int) C.int {
	r := vetPeer(int(fd), os.Geteuid(), peercred.LookupTCP, handshakeWait)
	if r == nil {
		return 1
	}
	if s := server(); s != nil {
		s.refused(r)
	}
	return 0
}

// refusalsPerSecond bounds the refusals logged one by one: a flood of
// connections is summed up instead.
const refusalsPerSecond = 5

// refusals counts the connections refused before libpmix read them, for
// the log; guarded by Server.mu.
type refusals struct {
	since  time.Time // the second being counted
	logged int
	quiet  int // refused and not logged since
}

// refused logs r, naming the peer's user and process, at most
// refusalsPerSecond a second; the others are counted and said with the
// next one logged.
func (s *Server) refused(r *refusal) {
	now := time.Now()
	s.mu.Lock()
	if now.Sub(s.refusing.since) >= time.Second {
		s.refusing.since, s.refusing.logged = now, 0
	}
	if s.refusing.logged >= refusalsPerSecond {
		s.refusing.quiet++
		s.mu.Unlock()
		return
	}
	s.refusing.logged++
	quiet := s.refusing.quiet
	s.refusing.quiet = 0
	s.mu.Unlock()
	ev := s.log.Warn().Int("uid", r.uid).Str("why", r.why)
	if r.uid >= 0 {
		ev = ev.Str("user", peercred.UserName(uint32(r.uid)))
	}
	if r.inode != 0 {
		if pid, comm := peercred.OwnerPID("/proc", r.inode); pid > 0 {
			ev = ev.Int("pid", pid).Str("comm", comm)
		}
	}
	if quiet > 0 {
		ev = ev.Int("more_refused", quiet)
	}
	ev.Msg("pmix: refused a connection before libpmix read it (libpmix takes the uid a client or tool claims on its word; the kernel says whose it is)")
}

// guard refuses the call it is asked for (ErrPermission) while a
// connection to the server has a peer of another user or not on this
// host (intruders, toolpeer.go), or when it cannot tell: the call may be
// theirs. It cuts (shutdown) those connections after cutAfter. It reads
// the host's TCP table (/proc/net/tcp, a few ms on a busy host), so it
// guards the calls that act beyond the node's data and are rare (query,
// abort, spawn, publish, unpublish, lookup, log, event), not a client's
// connect nor its fences.
func (s *Server) guard(what string) error {
	listening, err := s.listeningSockets()
	var in []intruder
	if err == nil {
		in, err = intruders("/proc/self/net", "/proc/self/fd", os.Geteuid(), listening, peercred.LookupTCP)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("call", what).Msg("pmix: refused: who is connected to this server is unknown")
		return plugin.Errorf(plugin.ErrPermission, "%s: who is connected to this PMIx server is unknown: %v", what, err)
	}
	if len(in) == 0 {
		return nil
	}
	time.AfterFunc(cutAfter, func() { cut(in) })
	for _, c := range in {
		user := "a peer not on this host"
		if c.uid >= 0 {
			user = peercred.UserName(uint32(c.uid))
		}
		s.log.Warn().Int("uid", c.uid).Str("user", user).Str("call", what).
			Msg("pmix: refused, and cuts, a connection of another user to this server (libpmix takes the uid a client or tool claims on its word)")
	}
	s.mu.Lock()
	s.lastCut, s.lastCutUID = time.Now(), in[len(in)-1].uid
	s.mu.Unlock()
	return plugin.Errorf(plugin.ErrPermission, "%s: another user connected to this PMIx server; its connection is cut", what)
}

// cut shuts the connections in down. The descriptors are libpmix's: each
// is cut only while it is still the socket that was found (it may have
// been closed and its number reused).
func cut(in []intruder) {
	for _, c := range in {
		var st syscall.Stat_t
		if syscall.Fstat(c.fd, &st) == nil && st.Ino == c.inode {
			_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
		}
	}
}

//export goQuery
func goQuery(keys **C.char, kq *C.int, nk C.size_t, qk, qv **C.char, qq *C.int, nq C.size_t, cbfunc C.pmix_info_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard("query"); err != nil {
		return rcOf(err)
	}
	req := &plugin.QueryRequest{}
	at := func(i int) *plugin.Query {
		for len(req.Queries) <= i {
			req.Queries = append(req.Queries, plugin.Query{})
		}
		return &req.Queries[i]
	}
	ks, kqs := unsafe.Slice(keys, int(nk)), unsafe.Slice(kq, int(nk))
	for i := range ks {
		q := at(int(kqs[i]))
		q.Keys = append(q.Keys, C.GoString(ks[i]))
	}
	qks, qvs, qqs := unsafe.Slice(qk, int(nq)), unsafe.Slice(qv, int(nq)), unsafe.Slice(qq, int(nq))
	for i := range qks {
		q := at(int(qqs[i]))
		q.Qualifiers = append(q.Qualifiers, plugin.Info{Key: C.GoString(qks[i]), Value: C.GoString(qvs[i])})
	}
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, plugin.DefaultLookupTimeout)
		defer cancel()
		resp, err := s.be.Query(ctx, req)
		if err != nil {
			s.log.Debug().Err(err).Msg("pmix: query")
			C.gopmi_query_done(cbfunc, rcOf(err), 0, nil, nil, cbdata)
			return
		}
		n := len(resp.Results)
		ak, av := cArray(n), cArray(n)
		for i, r := range resp.Results {
			ak.set(i, r.Key)
			av.set(i, r.Value)
		}
		C.gopmi_query_done(cbfunc, C.PMIX_SUCCESS, C.size_t(n), ak.p, av.p, cbdata)
		ak.free()
		av.free()
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

//export goLog
func goLog(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) {
	s := server()
	if s == nil {
		C.gopmi_op_done(cbfunc, C.PMIX_ERR_NOT_AVAILABLE, cbdata)
		return
	}
	req := &plugin.LogRequest{Proc: procOf(ns, rank)}
	if err := s.guard("log"); err != nil {
		// Answered off libpmix's upcall, as every answer: one inside it
		// wedged libpmix's server (no client connected after it, no
		// fence ended).
		rc := rcOf(err)
		go C.gopmi_op_done(cbfunc, rc, cbdata)
		return
	}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	for i := range ks {
		req.Data = append(req.Data, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	if rc := s.opCall("log", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Log(ctx, req) }); rc != C.PMIX_SUCCESS {
		go C.gopmi_op_done(cbfunc, rc, cbdata)
	}
}
