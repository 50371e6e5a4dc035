package launcher

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin/plugintest"
	"github.com/gopmi/gopmi/shim/serve"
)

// A job served here whose backend cannot come up fails, with the
// backend's exit status, as one served by a shim does.
func TestServedHereBackendFails(t *testing.T) {
	l, err := New(Config{Apps: []local.AppSpec{{Path: "/bin/true", Procs: 1}}, Hostname: "vm", Stderr: &plugintest.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := l.u.NewJob(l.cfg.Apps, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.u.Close() // every Configure now fails: the run is ending
	cfg, err := serve.NewConfig(l.bootstrap(spec, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	defer conns[1].Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := l.host(ctx, cfg, map[int32]net.Conn{0: conns[0]}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A publish needs the backend.
	if _, err := conns[1].Write([]byte("cmd=init pmi_version=1 pmi_subversion=1\ncmd=publish_name service=s port=p\n")); err != nil {
		t.Fatal(err)
	}
	_ = conns[1].SetReadDeadline(time.Now().Add(waitLimit))
	r := bufio.NewReader(conns[1])
	r.ReadString('\n') // init's answer
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "cmd=publish_result rc=-1") {
		t.Errorf("publish without a backend: %q", line)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait(ctx) }()
	select {
	case err := <-done:
		if serve.ExitCode(err) != serve.ExitBackend || !strings.Contains(err.Error(), "the run is ending") {
			t.Errorf("Wait: %v (exit %d), want the backend's failure", err, serve.ExitCode(err))
		}
	case <-time.After(waitLimit):
		t.Fatal("the job went on without its backend")
	}
}
