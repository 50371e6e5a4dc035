package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// The test binary doubles as a fake gopmi-shim (started as argv[0]
// "gopmi-shim") and as a fake task (GOPMI_TEST_HELPER=task), so the
// launcher's mechanics are tested with real processes, fds and signals.
const (
	envHelper      = "GOPMI_TEST_HELPER"
	envCtl         = "GOPMI_TEST_CTL"      // the test's control socket for tasks
	envFakeShim    = "GOPMI_FAKE_SHIM"     // fake shim mode
	envFakeShimDir = "GOPMI_FAKE_SHIM_DIR" // where the fake shim saves its bootstrap
)

func TestMain(m *testing.M) {
	// Look at the inherited fds before anything opens one.
	fds := openFDList()
	if filepath.Base(os.Args[0]) == ShimBinary {
		os.Exit(fakeShim(fds))
	}
	if os.Getenv(envHelper) == "task" {
		os.Exit(fakeTask(fds))
	}
	// As gopmi run does: whatever the test runner leaked to us must not
	// reach the children, whose fds the helpers check.
	SealInheritedFDs()
	goleak.VerifyTestMain(m)
}

// openFDList lists the open fds above 2 as "fd:target".
func openFDList() []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return []string{"error:" + err.Error()}
	}
	var out []string
	for _, e := range ents {
		n, _ := strconv.Atoi(e.Name())
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || n <= 2 {
			continue // the directory being read is gone by now
		}
		// The Go runtime's own: cgroup CPU limits, the netpoller.
		if strings.HasPrefix(target, "/sys/fs/cgroup/") || strings.HasPrefix(target, "anon_inode:") {
			continue
		}
		out = append(out, e.Name()+":"+target)
	}
	return out
}

// fakeShim checks what the launcher gave it, reports READY=1 and serves a
// line protocol on the task connections: "die" exits 3, "abort <status>
// <msg>" and "failed" reach the universe through link.Dial; any other
// line (the PMI a task sends to a node served by gopmi run itself) is
// ignored. It exits 0 when every task connection closed.
func fakeShim(fds []string) int {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return shimFail(2, "read bootstrap: %v", err)
	}
	var b shimv1.Bootstrap
	if err := protojson.Unmarshal(in, &b); err != nil {
		return shimFail(2, "bootstrap: %v", err)
	}
	if dir := os.Getenv(envFakeShimDir); dir != "" {
		name := fmt.Sprintf("%s-%d.json", b.GetJob().GetNspace(), b.GetNodeId())
		// Written whole or not at all: the test reads it while tasks run.
		tmp := filepath.Join(dir, "."+name)
		werr := os.WriteFile(tmp, in, 0o644)
		if werr == nil {
			werr = os.Rename(tmp, filepath.Join(dir, name))
		}
		if err := werr; err != nil {
			return shimFail(2, "save bootstrap: %v", err)
		}
	}
	var want []string
	if b.GetPmiPortFd() != "" {
		want = []string{b.GetPmiPortFd()}
	} else {
		for _, t := range b.GetTasks() {
			want = append(want, t.GetFdName())
		}
	}
	switch {
	case b.GetVersion() != 1:
		return shimFail(2, "bootstrap version %d", b.GetVersion())
	case os.Getenv("LISTEN_PID") != "":
		return shimFail(2, "LISTEN_PID is set")
	case os.Getenv("LISTEN_FDS") != strconv.Itoa(len(want)):
		return shimFail(2, "LISTEN_FDS=%s, want %d", os.Getenv("LISTEN_FDS"), len(want))
	case os.Getenv("LISTEN_FDNAMES") != strings.Join(want, ":"):
		return shimFail(2, "LISTEN_FDNAMES=%s, want %s", os.Getenv("LISTEN_FDNAMES"), strings.Join(want, ":"))
	case b.GetBackend().GetName() != "local" || len(b.GetBackend().GetArgs()) != 2 || os.Getenv(forwarder.EnvUniverse) != b.GetBackend().GetArgs()[1]:
		return shimFail(2, "backend %v, %s=%s", b.GetBackend(), forwarder.EnvUniverse, os.Getenv(forwarder.EnvUniverse))
	}
	if len(fds) != len(want) {
		return shimFail(2, "inherited fds %v, want %d sockets", fds, len(want))
	}
	slices.SortFunc(fds, func(a, b string) int {
		x, _, _ := strings.Cut(a, ":")
		y, _, _ := strings.Cut(b, ":")
		n, _ := strconv.Atoi(x)
		m, _ := strconv.Atoi(y)
		return n - m
	})
	for i, f := range fds {
		if !strings.HasPrefix(f, strconv.Itoa(3+i)+":socket:") {
			return shimFail(2, "inherited fds %v, want sockets on 3..%d", fds, 2+len(want))
		}
	}
	switch os.Getenv(envFakeShim) {
	case "fail-start":
		fmt.Fprintln(os.Stderr, "fake shim: failing on purpose")
		notify("STATUS=fake failure\nERRNO=5")
		return 3
	case "exit-early":
		fmt.Fprintln(os.Stderr, "fake shim: exiting early")
		return 4
	case "no-ready":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
		return 0
	}
	if !notify("READY=1") {
		return shimFail(2, "no NOTIFY_SOCKET")
	}
	var wg sync.WaitGroup
	serve := func(c net.Conn, rank int32) {
		defer wg.Done()
		defer c.Close()
		sc := bufio.NewScanner(c)
		if rank < 0 && sc.Scan() {
			// PMI_PORT: the task says who it is first, as PMI-1 does.
			r, _ := strconv.Atoi(strings.TrimPrefix(sc.Text(), "cmd=initack pmiid="))
			rank = int32(r)
		}
		for sc.Scan() {
			shimCommand(&b, rank, sc.Text())
		}
	}
	if b.GetPmiPortFd() != "" {
		ln, err := net.FileListener(os.NewFile(3, "pmi-port"))
		if err != nil {
			return shimFail(2, "pmi port listener: %v", err)
		}
		for range b.GetTasks() {
			c, err := ln.Accept()
			if err != nil {
				return shimFail(2, "accept: %v", err)
			}
			wg.Add(1)
			go serve(c, -1)
		}
		ln.Close()
	} else {
		for i, t := range b.GetTasks() {
			c, err := net.FileConn(os.NewFile(uintptr(3+i), t.GetFdName()))
			if err != nil {
				return shimFail(2, "task fd %d: %v", 3+i, err)
			}
			wg.Add(1)
			go serve(c, t.GetRank())
		}
	}
	wg.Wait()
	return 0
}

func shimCommand(b *shimv1.Bootstrap, rank int32, line string) {
	cmd, rest, _ := strings.Cut(line, " ")
	proc := plugin.Proc{Nspace: b.GetJob().GetNspace(), Rank: rank}
	switch cmd {
	case "die":
		fmt.Fprintln(os.Stderr, "fake shim: told to die")
		os.Exit(3)
	case "abort", "failed":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := link.Dial(ctx, os.Getenv(forwarder.EnvUniverse))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake shim:", err)
			os.Exit(1)
		}
		defer c.Close()
		if cmd == "abort" {
			st, msg, _ := strings.Cut(rest, " ")
			status, _ := strconv.Atoi(st)
			err = c.Backend().Abort(ctx, &plugin.AbortRequest{Proc: proc, Status: int32(status), Message: msg})
		} else {
			err = c.Backend().NotifyEvent(ctx, &plugin.EventRequest{Code: plugin.EventProcAborted, Source: proc,
				Info: []plugin.Info{{Key: "reason", Value: "fake: ended before finalize"}}})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake shim:", err)
		}
	}
}

func shimFail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, "fake shim: "+msg)
	notify("STATUS=" + msg + "\nERRNO=22")
	return code
}

func notify(msg string) bool {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return false
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.Write([]byte(msg))
	return err == nil
}

// taskReport is what a fake task tells the test when it starts.
type taskReport struct {
	Env   map[string]string
	FDs   []string
	Stdin string
	Args  []string
	Pid   int
}

// fakeTask reports to the test's control socket and obeys it: "exit N",
// "pmi <line>" (written to its PMI connection), "kill N" (signal itself).
// EOF on the control socket exits 0. Arguments: "ignore-term", "exit=N"
// (exit at once, without the control socket).
func fakeTask(fds []string) int {
	for _, a := range os.Args[1:] {
		if code, ok := strings.CutPrefix(a, "exit="); ok {
			n, _ := strconv.Atoi(code)
			return n
		}
		if a == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
		}
	}
	rep := taskReport{Env: map[string]string{}, FDs: fds, Args: os.Args[1:], Pid: os.Getpid()}
	rep.Stdin, _ = os.Readlink("/proc/self/fd/0")
	for _, e := range os.Environ() {
		k, v, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "MPI_") || strings.HasPrefix(k, "LISTEN_") ||
			k == "NOTIFY_SOCKET" || k == forwarder.EnvUniverse || k == "EXTRA" || k == "APPVAR" {
			rep.Env[k] = v
		}
	}
	var pmi net.Conn
	var err error
	if port := os.Getenv("PMI_PORT"); port != "" {
		pmi, err = net.Dial("tcp", port)
		if err == nil {
			_, err = fmt.Fprintf(pmi, "cmd=initack pmiid=%s\n", os.Getenv("PMI_ID"))
		}
	} else if os.Getenv("PMI_FD") == "3" {
		pmi, err = net.FileConn(os.NewFile(3, "pmi"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake task: pmi:", err)
		return 90
	}
	c, err := net.Dial("unix", os.Getenv(envCtl))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake task: ctl:", err)
		return 91
	}
	if err := json.NewEncoder(c).Encode(rep); err != nil {
		return 92
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "exit":
			n, _ := strconv.Atoi(arg)
			return n
		case "pmi":
			if pmi != nil {
				fmt.Fprintln(pmi, arg)
			}
		case "kill":
			n, _ := strconv.Atoi(arg)
			_ = syscall.Kill(os.Getpid(), syscall.Signal(n))
		}
	}
	return 0
}

// ctlServer is the test's end of the tasks' control connections.
type ctlServer struct {
	path    string
	ln      net.Listener
	reports chan *taskConn
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

// taskConn is one fake task as the test sees it.
type taskConn struct {
	taskReport
	conn net.Conn
}

func (tc *taskConn) rank() int32 {
	r, _ := strconv.Atoi(tc.Env["PMI_RANK"])
	return int32(r)
}

func (tc *taskConn) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(tc.conn, line); err != nil {
		t.Errorf("send %q to rank %d: %v", line, tc.rank(), err)
	}
}

func newCtlServer(t *testing.T) *ctlServer {
	t.Helper()
	s := &ctlServer{path: filepath.Join(shortTempDir(t), "ctl.sock"), reports: make(chan *taskConn, 2048)}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				var rep taskReport
				// A task that dies before reporting is seen by the test as
				// missing; its connection is closed at clean-up.
				if err := json.NewDecoder(c).Decode(&rep); err == nil {
					s.reports <- &taskConn{taskReport: rep, conn: c}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// wait returns the next n tasks to report, sorted by job and rank.
func (s *ctlServer) wait(t *testing.T, n int) []*taskConn {
	t.Helper()
	var out []*taskConn
	deadline := time.After(waitLimit)
	for len(out) < n {
		select {
		case tc := <-s.reports:
			out = append(out, tc)
		case <-deadline:
			t.Fatalf("%d of %d tasks reported in %s", len(out), n, waitLimit)
		}
	}
	slices.SortFunc(out, func(a, b *taskConn) int {
		if c := strings.Compare(a.Env["PMI_JOBID"], b.Env["PMI_JOBID"]); c != 0 {
			return c
		}
		return int(a.rank() - b.rank())
	})
	return out
}
