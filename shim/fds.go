package shim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/shim/serve"
)

// inheritedFiles takes the fds the launcher passed with LISTEN_FDS and
// LISTEN_FDNAMES. A launcher that cannot set LISTEN_PID after fork leaves
// it unset and the shim claims the fds (see the package doc). The
// variables are removed from the environment and the fds marked
// close-on-exec so that the backend plugin inherits none of them.
func inheritedFiles() ([]*os.File, error) {
	nfds := os.Getenv("LISTEN_FDS")
	if nfds == "" {
		unsetListenEnv()
		return nil, nil
	}
	n, err := strconv.Atoi(nfds)
	if err != nil || n <= 0 {
		unsetListenEnv()
		return nil, fmt.Errorf("%w: LISTEN_FDS=%q is not a positive number", serve.ErrUsage, nfds)
	}
	self := strconv.Itoa(os.Getpid())
	switch pid := os.Getenv("LISTEN_PID"); pid {
	case "":
		// The launcher's contract: unset means "for whoever I exec".
		if err := os.Setenv("LISTEN_PID", self); err != nil {
			return nil, fmt.Errorf("set LISTEN_PID: %w", err)
		}
	case self:
	default:
		unsetListenEnv()
		return nil, fmt.Errorf("%w: LISTEN_PID=%s is not this process (pid %s); the fds were meant for another process", serve.ErrUsage, pid, self)
	}
	if names := os.Getenv("LISTEN_FDNAMES"); names != "" && strings.Count(names, ":")+1 != n {
		// activation.Files would quietly name the extra fds LISTEN_FD_<n>
		// and the tasks would miss theirs; a miscount is a launcher bug.
		unsetListenEnv()
		return nil, fmt.Errorf("%w: LISTEN_FDNAMES=%q has %d names for LISTEN_FDS=%d", serve.ErrUsage, names, strings.Count(names, ":")+1, n)
	}
	return activation.Files(true), nil
}

func unsetListenEnv() {
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		_ = os.Unsetenv(k)
	}
}

// taskFDs are the inherited fds sorted out by use.
type taskFDs struct {
	conns map[int32]net.Conn // by rank
	port  net.Listener       // nil unless pmi_port_fd is set
}

// close closes everything still held.
func (t *taskFDs) close() {
	for _, c := range t.conns {
		_ = c.Close()
	}
	if t.port != nil {
		_ = t.port.Close()
	}
}

// sortFiles matches the inherited files to the bootstrap's tasks by name
// and turns them into connections. It takes ownership of every file: the
// ones no task names are closed with a warning, and on an error all are
// closed.
func sortFiles(files []*os.File, c *serve.Config, log zerolog.Logger) (_ *taskFDs, retErr error) {
	byName := map[string]*os.File{}
	defer func() {
		for _, f := range byName {
			_ = f.Close()
		}
	}()
	var dupErr error
	for _, f := range files {
		if _, dup := byName[f.Name()]; dup {
			if dupErr == nil {
				dupErr = fmt.Errorf("%w: LISTEN_FDNAMES: %q names two fds", serve.ErrUsage, f.Name())
			}
			_ = f.Close()
			continue
		}
		byName[f.Name()] = f
	}
	if dupErr != nil {
		return nil, dupErr
	}

	out := &taskFDs{conns: map[int32]net.Conn{}}
	defer func() {
		if retErr != nil {
			out.close()
		}
	}()
	for _, t := range c.Tasks {
		if t.FDName == "" {
			continue
		}
		f, ok := byName[t.FDName]
		if !ok {
			return nil, fmt.Errorf("%w: rank %d: fd %q is not among the inherited fds (LISTEN_FDNAMES: %s)", serve.ErrUsage, t.Rank, t.FDName, fileNames(files))
		}
		delete(byName, t.FDName)
		conn, err := fileConn(f)
		if err != nil {
			return nil, fmt.Errorf("%w: rank %d: fd %q: %w", serve.ErrUsage, t.Rank, t.FDName, err)
		}
		out.conns[t.Rank] = conn
	}
	if c.PortFD != "" {
		f, ok := byName[c.PortFD]
		if !ok {
			return nil, fmt.Errorf("%w: pmi_port_fd %q is not among the inherited fds (LISTEN_FDNAMES: %s)", serve.ErrUsage, c.PortFD, fileNames(files))
		}
		delete(byName, c.PortFD)
		l, err := fileListener(f)
		if err != nil {
			return nil, fmt.Errorf("%w: pmi_port_fd %q: %w", serve.ErrUsage, c.PortFD, err)
		}
		out.port = l
	}
	for name := range byName {
		log.Warn().Str("fd", name).Msg("inherited fd that no task names; closing it")
	}
	return out, nil
}

func fileNames(files []*os.File) string {
	if len(files) == 0 {
		return "none"
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name()
	}
	return strings.Join(names, ":")
}

// fileConn turns a stream socket fd into a net.Conn and closes f (the conn
// holds a duplicate).
func fileConn(f *os.File) (net.Conn, error) {
	defer f.Close()
	if err := checkSocket(f, false); err != nil {
		return nil, err
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("wrap connection: %w", err)
	}
	return c, nil
}

// fileListener turns a listening stream socket fd into a net.Listener and
// closes f.
func fileListener(f *os.File) (net.Listener, error) {
	defer f.Close()
	if err := checkSocket(f, true); err != nil {
		return nil, err
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("wrap listener: %w", err)
	}
	return l, nil
}

// checkSocket refuses what would fail later in a confusing way: a pipe or
// a datagram socket for a task, a socket nobody listen()ed on for the port.
func checkSocket(f *os.File, listening bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("inspect fd: %w", err)
	}
	var typ, acc int
	var serr, aerr error
	if err := rc.Control(func(fd uintptr) {
		typ, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TYPE)
		acc, aerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	}); err != nil {
		return fmt.Errorf("inspect fd: %w", err)
	}
	switch {
	case errors.Is(serr, syscall.ENOTSOCK):
		return fmt.Errorf("not a socket")
	case errors.Is(serr, syscall.EBADF):
		return fmt.Errorf("not open")
	case serr != nil:
		return fmt.Errorf("inspect socket: %w", serr)
	case typ != syscall.SOCK_STREAM:
		return fmt.Errorf("not a stream socket (type %d)", typ)
	case aerr != nil:
		return fmt.Errorf("inspect socket: %w", aerr)
	case listening && acc == 0:
		return fmt.Errorf("socket is not listening")
	case !listening && acc != 0:
		return fmt.Errorf("a listening socket, not a connection (name it in pmi_port_fd)")
	}
	return nil
}
