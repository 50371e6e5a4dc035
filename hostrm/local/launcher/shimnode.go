package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
	"github.com/gopmi/gopmi/shim/sockdir"
)

// shimProc is a node served by a gopmi-shim process.
type shimProc struct {
	pid    int    // 0 until started; written once, with mu held
	name   string // the binary's name: gopmi-shim, gopmi-pmix
	pmix   bool   // a PMIx server: its directories go once it is reaped
	tail   *tailWriter
	notify *notifier
}

// serverSpec is how a node's server process starts: its binary, the
// listeners and sockets it inherits (LISTEN_FDS, by name) and its
// bootstrap, made on exec's stdin goroutine while the tasks start.
type serverSpec struct {
	path, name string
	pmix       bool
	files      []*os.File
	names      []string
	boot       func() *shimv1.Bootstrap
}

// startShim starts one node's gopmi-shim (on the starter's thread) and
// closes the launcher's copies of the shim's ends.
func (l *Launcher) startShim(rj *runJob, s *nodeStart) error {
	ns := rj.spec.Job.Nspace
	files, names := s.servers, make([]string, 0, len(s.servers))
	if s.port != nil {
		f, err := s.port.(*net.TCPListener).File()
		if err != nil {
			return fmt.Errorf("job %s node %d: pmi port listener: %w", ns, s.rn.node.ID, err)
		}
		defer f.Close()
		files, names = []*os.File{f}, []string{pmiPortFD}
	} else {
		for _, r := range s.rn.node.Ranks {
			names = append(names, taskFDName(r))
		}
	}
	index := nodeIndex(rj.spec.Job, s.rn.node.ID)
	spec := serverSpec{path: l.shimPath, name: l.shimName(), pmix: l.face.pmix(), files: files, names: names,
		boot: func() *shimv1.Bootstrap { return l.bootstrap(rj.spec, index, rj.secret) }}
	if err := l.startServer(rj, s.rn, spec); err != nil {
		return err
	}
	for _, f := range s.servers {
		f.Close()
	}
	s.servers = nil
	if s.port != nil {
		s.port.Close()
		s.port = nil
	}
	return nil
}

// nodeIndex is node id's index in job's layout.
func nodeIndex(job plugin.Job, id int32) int {
	for i, nd := range job.Nodes {
		if nd.ID == id {
			return i
		}
	}
	return 0
}

// startServer starts a server process of rn's node (on the starter's
// thread), reaped by reapShim.
func (l *Launcher) startServer(rj *runJob, rn *runNode, spec serverSpec) error {
	ns := rj.spec.Job.Nspace
	l.mu.Lock()
	path := link.AbstractName("n" + strconv.Itoa(l.seq))
	l.seq++
	l.mu.Unlock()
	n, err := newNotifier(path, l.log.With().Str("job", ns).Int32("node", rn.node.ID).Logger())
	if err != nil {
		return fmt.Errorf("job %s node %d: notify socket: %w", ns, rn.node.ID, err)
	}
	sp := &shimProc{name: spec.name, pmix: spec.pmix, notify: n, tail: &tailWriter{w: l.out, quiet: &l.quiet}}
	l.mu.Lock()
	rn.shim = sp
	l.mu.Unlock()

	env := childEnv(os.Environ())
	if os.Getenv("GOPMI_LOG_FORMAT") == "" {
		env = append(env, "GOPMI_LOG_FORMAT=console")
	}
	env = append(env,
		forwarder.EnvUniverse+"="+l.universeAddr(),
		"LISTEN_FDS="+strconv.Itoa(len(spec.files)),
		"LISTEN_FDNAMES="+strings.Join(spec.names, ":"),
		"NOTIFY_SOCKET="+n.conn.LocalAddr().String(),
	)
	cmd := &exec.Cmd{
		Path: spec.path,
		Args: []string{spec.name},
		Env:  env,
		Dir:  "/",
		// The bootstrap is built on exec's stdin goroutine, while the
		// tasks start: the shim reads it only once its runtime is up.
		Stdin: &lazyReader{make: func() ([]byte, error) {
			return bootstrapJSON(spec.boot())
		}},
		Stdout:     l.out,
		Stderr:     sp.tail,
		ExtraFiles: spec.files,
		// Its own process group: a terminal's ^C reaches the tasks, and
		// gopmi run decides when the shims go.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   time.Second,
	}
	if err := startChild(cmd); err != nil {
		return fmt.Errorf("start %s for job %s node %d: %w", spec.path, ns, rn.node.ID, err)
	}
	l.mu.Lock()
	sp.pid = cmd.Process.Pid
	rj.procs++
	if l.terminating() {
		rn.stop(syscall.SIGKILL)
	}
	l.mu.Unlock()
	l.log.Debug().Str("job", ns).Int32("node", rn.node.ID).Int("pid", cmd.Process.Pid).Str("server", spec.name).Msg("server started")
	go l.reapShim(rj, rn, cmd)
	return nil
}

// waitReady waits for the shim's READY=1, its failure (ERRNO=, or an
// exit), or ctx.
func (l *Launcher) waitReady(ctx context.Context, rj *runJob, s *nodeStart) error {
	sp := s.rn.shim
	what := fmt.Sprintf("%s for job %s node %d", sp.name, rj.spec.Job.Nspace, s.rn.node.ID)
	n := sp.notify
	why := func() string {
		status, errno := n.lastStatus()
		if errno != "" {
			errno = "errno " + errno
		}
		return firstNonEmpty(status, sp.tail.lastLine(), errno, "no message")
	}
	failed := func() error { return fmt.Errorf("%s failed to start: %s", what, why()) }
	select {
	case <-n.ready:
		return nil
	case <-n.failed:
		return failed()
	case <-s.rn.exited:
		// Tasks start before their shim is ready, so a short job's shim
		// may serve it and exit before READY is read here: a clean exit
		// is not a failed start.
		if isClosed(n.ready) || s.rn.code == 0 {
			return nil
		}
		// The shim's ERRNO= is read (at the latest when it is reaped)
		// before its exit is known, but select picks either once both
		// happened: the shim's own word wins.
		if isClosed(n.failed) {
			return failed()
		}
		return fmt.Errorf("%s %s before it was ready: %s", what, s.rn.how, why())
	case <-l.ending:
		return plugin.Errorf(plugin.ErrAborted, "%s: the run is ending", what)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s was not ready in time: %s", what, why())
		}
		return fmt.Errorf("%s: start cancelled: %w", what, ctx.Err())
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// reapShim waits for a shim and records how it ended.
func (l *Launcher) reapShim(rj *runJob, n *runNode, cmd *exec.Cmd) {
	_ = wait(cmd)
	// A shim killed while its backend was starting could not remove
	// its backend's socket directory.
	sockdir.Remove(cmd.Process.Pid)
	sp := n.shim
	if sp.pmix {
		removePMIxDirs(rj.spec.Job.Nspace, n.node.ID)
	}
	sp.notify.close()
	_, _, how := exitInfo(cmd.ProcessState)
	code := cmd.ProcessState.ExitCode()
	if code < 0 {
		code = serve.ExitInternal // killed by a signal
	}
	// The shim's last STATUS= or log line says why it failed.
	msg := how
	status, _ := sp.notify.lastStatus()
	if last := firstNonEmpty(status, sp.tail.lastLine()); last != "" {
		msg = last + " (" + how + ")"
	}
	line := fmt.Sprintf("gopmi: %s for job %s node %d failed: %s", sp.name, rj.spec.Job.Nspace, n.node.ID, msg)
	l.serverEnded(rj, n, code, how, line)
}

// lazyReader makes its content on the first Read.
type lazyReader struct {
	make func() ([]byte, error)
	r    *bytes.Reader
	err  error
}

func (z *lazyReader) Read(p []byte) (int, error) {
	if z.r == nil && z.err == nil {
		b, err := z.make()
		z.r, z.err = bytes.NewReader(b), err
	}
	if z.err != nil {
		return 0, z.err
	}
	return z.r.Read(p)
}

// shimName is the name a node's server process goes by (face.server).
func (l *Launcher) shimName() string { return l.face.server() }
