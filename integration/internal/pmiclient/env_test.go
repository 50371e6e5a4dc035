package pmiclient

import (
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnvFrom(t *testing.T) {
	env := map[string]string{"PMI_FD": "9", "PMI_RANK": "3", "PMI_SIZE": "4", "PMI_JOBID": "12.0", "PMI_SPAWNED": "1"}
	got, err := EnvFrom(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Env{FD: 9, ID: -1, Rank: 3, Size: 4, JobID: "12.0", Spawned: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = EnvFrom(func(k string) string { return map[string]string{"PMI_PORT": "h:1", "PMI_ID": "0"}[k] })
	if err != nil || got != (Env{FD: -1, Port: "h:1", ID: 0, Rank: -1, Size: -1}) {
		t.Errorf("port env = %+v, %v", got, err)
	}
	if _, err := EnvFrom(func(k string) string { return map[string]string{"PMI_RANK": "x"}[k] }); err == nil {
		t.Errorf("PMI_RANK=x accepted")
	}
}

func TestDialNoPMI(t *testing.T) {
	if _, err := Dial(ctxT(t), Env{FD: -1, ID: -1, Rank: -1, Size: -1}); !errors.Is(err, ErrNoPMI) {
		t.Errorf("err = %v, want ErrNoPMI", err)
	}
}

// PMI_FD: the client takes over the descriptor a launcher passed.
func TestDialFD(t *testing.T) {
	ctx := ctxT(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sf := os.NewFile(uintptr(fds[1]), "server")
	srvConn, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer srvConn.Close()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := srvConn.Read(buf)
		if err == nil && string(buf[:n]) != "cmd=get_appnum\n" {
			err = errors.New("server read " + strconv.Quote(string(buf[:n])))
		}
		if err == nil {
			_, err = srvConn.Write([]byte("cmd=appnum appnum=5\n"))
		}
		done <- err
	}()
	c, err := Dial(ctx, Env{FD: fds[0], ID: -1, Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.GetAppnum(ctx); err != nil || n != 5 {
		t.Fatalf("GetAppnum = %d, %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// PMI_PORT: TCP to host:port, then the initack handshake.
func TestDialPort(t *testing.T) {
	ctx := ctxT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		// The first connection (Dial2) only closes again.
		first, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		first.Close()
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		if err == nil && string(buf[:n]) != "cmd=initack pmiid=4\n" {
			err = errors.New("server read " + strconv.Quote(string(buf[:n])))
		}
		if err == nil {
			_, err = conn.Write([]byte("cmd=initack rc=0\ncmd=set size=8\ncmd=set rank=4\ncmd=set debug=1\n"))
		}
		done <- err
	}()
	c, err := Dial2(ctx, Env{FD: -1, Port: ln.Addr().String(), ID: 4, Rank: -1, Size: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c1, err := Dial(ctx, Env{FD: -1, Port: ln.Addr().String(), ID: 4, Rank: -1, Size: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	rank, size, debug, err := c1.Initack(ctx, 4)
	if err != nil || rank != 4 || size != 8 || debug != 1 {
		t.Fatalf("Initack = %d %d %d %v", rank, size, debug, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
