package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/shim/serve"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// socketpair returns the shim's end as a file named name and the task's
// end as a connection.
func socketpair(t *testing.T, name string) (*os.File, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := os.NewFile(uintptr(fds[1]), "client-"+name)
	defer client.Close()
	c, err := net.FileConn(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return os.NewFile(uintptr(fds[0]), name), c
}

// listenerFile returns a listening unix socket as a file named name and
// its address.
func listenerFile(t *testing.T, name string) (*os.File, string) {
	t.Helper()
	addr := socketPath(t, "port.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: addr}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 16); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), name), addr
}

// isClosed reports whether f's descriptor is closed.
func isClosed(f *os.File) bool {
	_, err := f.Stat()
	return err != nil
}

func TestSortFiles(t *testing.T) {
	c, err := serve.NewConfig(oneNode(2))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()

	t.Run("matched", func(t *testing.T) {
		f0, c0 := socketpair(t, "rank0")
		f1, _ := socketpair(t, "rank1")
		extra, _ := socketpair(t, "stray")
		var logBuf bytes.Buffer
		fds, err := sortFiles([]*os.File{f1, extra, f0}, c, zerolog.New(&logBuf))
		if err != nil {
			t.Fatal(err)
		}
		defer fds.close()
		if len(fds.conns) != 2 || fds.port != nil {
			t.Fatalf("got %d conns, port %v", len(fds.conns), fds.port)
		}
		if !isClosed(extra) || !isClosed(f0) || !isClosed(f1) {
			t.Error("files not closed after wrapping")
		}
		if !strings.Contains(logBuf.String(), `"fd":"stray"`) {
			t.Errorf("no warning about the stray fd: %s", logBuf.String())
		}
		// rank 0's conn reaches rank 0's task.
		if _, err := fds.conns[0].Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		_ = c0.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 1)
		if _, err := c0.Read(b); err != nil || b[0] != 'x' {
			t.Fatalf("read %q %v", b, err)
		}
	})

	t.Run("port", func(t *testing.T) {
		b := oneNode(2)
		b.PmiPortFd = "pmiport"
		b.Tasks[1].FdName = ""
		pc, err := serve.NewConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		f0, _ := socketpair(t, "rank0")
		lf, _ := listenerFile(t, "pmiport")
		fds, err := sortFiles([]*os.File{lf, f0}, pc, log)
		if err != nil {
			t.Fatal(err)
		}
		defer fds.close()
		if fds.port == nil || len(fds.conns) != 1 {
			t.Fatalf("port %v conns %d", fds.port, len(fds.conns))
		}
	})

	errTests := []struct {
		name  string
		files func(t *testing.T) []*os.File
		port  bool
		msg   string
	}{
		{"missing", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			return []*os.File{f0}
		}, false, `rank 1: fd "rank1" is not among the inherited fds (LISTEN_FDNAMES: rank0)`},
		{"none", func(t *testing.T) []*os.File { return nil }, false, "LISTEN_FDNAMES: none"},
		{"duplicate", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			f1, _ := socketpair(t, "rank0")
			return []*os.File{f0, f1}
		}, false, `"rank0" names two fds`},
		{"pipe", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			var p [2]int
			if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			syscall.Close(p[1])
			return []*os.File{f0, os.NewFile(uintptr(p[0]), "rank1")}
		}, false, `rank 1: fd "rank1": not a socket`},
		{"listener as task", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			lf, _ := listenerFile(t, "rank1")
			return []*os.File{f0, lf}
		}, false, "a listening socket"},
		{"port not listening", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			f1, _ := socketpair(t, "rank1")
			fp, _ := socketpair(t, "pmiport")
			return []*os.File{f0, f1, fp}
		}, true, `pmi_port_fd "pmiport": socket is not listening`},
		{"port missing", func(t *testing.T) []*os.File {
			f0, _ := socketpair(t, "rank0")
			f1, _ := socketpair(t, "rank1")
			return []*os.File{f0, f1}
		}, true, `pmi_port_fd "pmiport" is not among`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			b := oneNode(2)
			if tt.port {
				b.PmiPortFd = "pmiport"
			}
			cc, err := serve.NewConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			files := tt.files(t)
			_, err = sortFiles(files, cc, log)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want %q", err, tt.msg)
			}
			if serve.ExitCode(err) != serve.ExitUsage {
				t.Errorf("exit code %d", serve.ExitCode(err))
			}
			for _, f := range files {
				if !isClosed(f) {
					t.Errorf("%s left open", f.Name())
				}
			}
		})
	}
}

// TestInheritedFiles runs a child with real LISTEN_* variables, the way a
// launcher written in Go starts the shim.
func TestInheritedFiles(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		nfds int
		want fdReport
	}{
		{
			name: "LISTEN_PID unset",
			env:  []string{"LISTEN_FDS=2", "LISTEN_FDNAMES=rank0:rank1"},
			nfds: 2,
			want: fdReport{Names: []string{"rank0", "rank1"}, Cloexec: []bool{true, true}},
		},
		{
			name: "no names",
			env:  []string{"LISTEN_FDS=1"},
			nfds: 1,
			want: fdReport{Names: []string{"LISTEN_FD_3"}, Cloexec: []bool{true}},
		},
		{
			name: "LISTEN_PID of another process",
			env:  []string{"LISTEN_FDS=1", "LISTEN_FDNAMES=rank0", "LISTEN_PID=1"},
			nfds: 1,
			want: fdReport{Err: "LISTEN_PID=1 is not this process"},
		},
		{
			name: "names miscounted",
			env:  []string{"LISTEN_FDS=2", "LISTEN_FDNAMES=rank0"},
			nfds: 2,
			want: fdReport{Err: `has 1 names for LISTEN_FDS=2`},
		},
		{
			name: "bad count",
			env:  []string{"LISTEN_FDS=x"},
			want: fdReport{Err: `LISTEN_FDS="x" is not a positive number`},
		},
		{
			name: "none",
			want: fdReport{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], roleFDs)
			cmd.Env = helperEnv(tt.env...)
			for i := 0; i < tt.nfds; i++ {
				f, _ := socketpair(t, "x")
				defer f.Close()
				cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			var got fdReport
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("helper output %q: %v", out, err)
			}
			if tt.want.Err != "" {
				if !strings.Contains(got.Err, tt.want.Err) {
					t.Errorf("error %q, want %q", got.Err, tt.want.Err)
				}
			} else if got.Err != "" {
				t.Errorf("error %q", got.Err)
			}
			if diff := cmp.Diff(tt.want.Names, got.Names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.Cloexec, got.Cloexec); diff != "" {
				t.Errorf("close-on-exec (-want +got):\n%s", diff)
			}
			// Whatever happened, nothing leaks to the backend.
			for k, v := range got.Env {
				if v != "" {
					t.Errorf("%s=%s left in the environment", k, v)
				}
			}
		})
	}
}
