//go:build pmix

package pmix

/*
#cgo pkg-config: pmix hwloc
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/shim/pmix/engine"
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
	// default plugin.DefaultFenceTimeout (engine.Config's).
	FenceTimeout time.Duration
	// Rendezvous, when set, is the listening TCP socket (127.0.0.1) the
	// clients were told to reach this server at (RendezvousEnv) before
	// it existed: libpmix listens on it instead of a socket of its own
	// (rendezvous.c), and accepts only once OpenGate (after the job's
	// registration). Start takes a copy; the caller closes its own.
	Rendezvous *os.File
	Logger     zerolog.Logger
}

// Server is a process's PMIx server: libpmix's, whose callbacks
// (callbacks.go) hand what clients ask to the engine, which decides.
type Server struct {
	opts  Options
	log   zerolog.Logger
	crew  *crew.Crew // the engine's calls and timers, and the guard's cuts
	eng   *engine.Engine
	guard *guard
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
	cr := crew.New(nil)
	s := &Server{opts: opts, log: opts.Logger, crew: cr, guard: newGuard(opts.Logger, cr),
		eng: engine.New(engine.Config{Backend: opts.Backend, Lib: lib{}, Crew: cr, FenceTimeout: opts.FenceTimeout, Logger: opts.Logger})}
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
			cr.Close()
			return nil, fmt.Errorf("pmix: rendezvous: %w", err)
		}
		C.gopmi_adopt_listener(C.int(fd))
	}
	if err := status(C.gopmi_server_init(tmp, data, id, tools)); err != nil {
		current.Store(nil)
		cr.Close()
		C.gopmi_open_gate()
		return nil, fmt.Errorf("pmix: server init: %w", err)
	}
	if opts.Rendezvous != nil && C.gopmi_adopted() == 0 {
		// libpmix made no TCP listener: the clients would wait at the
		// rendezvous for ever.
		C.gopmi_server_finalize()
		current.Store(nil)
		cr.Close()
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
	// The engine's calls end with the crew's context (news, a finalize
	// or a client lost, within a bound of its own) and are waited for.
	s.crew.Close()
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

// RegisterJob registers job with libpmix as node's server sees it, and
// its ranks on node as clients of this user; it returns what each local
// rank's environment needs (PMIx_server_setup_fork: the namespace, rank,
// the server's address), by rank. A client of a job not registered is
// refused, so the tasks start after this.
func (s *Server) RegisterJob(job plugin.Job, node int32) (map[int32][]string, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	ni := job.NodeIndex(node)
	if ni < 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "pmix: job %s has no node %d", job.Nspace, node)
	}
	if err := (lib{}).Register(job, ni); err != nil {
		return nil, err
	}
	local := engine.NodeRanks(job.Nodes[ni])
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
	// Its clients connect once this returns (they start after, or the
	// gate opens after).
	s.eng.Host(job, ni)
	return envs, nil
}

// server is the process's Server, or nil once it closed.
func server() *Server {
	return current.Load()
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
