package serve

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// connPair returns a taskConn on one end of a socketpair, its writer
// running, and the task's end.
func connPair(t *testing.T, maxQueue int) (*taskConn, net.Conn) {
	t.Helper()
	conn, client := connected(t)
	tc := newTaskConn(conn, maxQueue, zerolog.Nop())
	go tc.writeLoop()
	t.Cleanup(func() {
		tc.abort(net.ErrClosed)
		waitClosed(t, tc.written, "writer")
	})
	return tc, client
}

// connected returns the two ends of a stream socketpair; the test closes
// the client's end when it ends.
func connected(t *testing.T) (server, client net.Conn) {
	t.Helper()
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
	t.Cleanup(func() { conns[1].Close() })
	return conns[0], conns[1]
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not end", what)
	}
}

func TestTaskConnSendOrderAndCloseDrains(t *testing.T) {
	tc, client := connPair(t, 1<<20)
	var want strings.Builder
	for i := range 100 {
		line := strings.Repeat(string(rune('a'+i%26)), i) + "\n"
		want.WriteString(line)
		b := []byte(line)
		if err := tc.Send(b); err != nil {
			t.Fatal(err)
		}
		// The bridge may reuse its buffer once Send returns.
		for j := range b {
			b[j] = 'X'
		}
	}
	if err := tc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tc.Send([]byte("late\n")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Errorf("task read %d bytes, want %d (order or content differs)", len(got), want.Len())
	}
	waitClosed(t, tc.written, "writer")
}

// A task that does not read is failed when its queue is full: Send never
// blocks the bridge.
func TestTaskConnSlowReader(t *testing.T) {
	tc, client := connPair(t, 64<<10)
	line := []byte(strings.Repeat("v", 1000) + "\n")
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		err = tc.Send(line)
	}
	if !errors.Is(err, errSlowReader) {
		t.Fatalf("got %v, want errSlowReader", err)
	}
	if err := tc.Send(line); !errors.Is(err, errSlowReader) {
		t.Errorf("next Send: %v", err)
	}
	waitClosed(t, tc.written, "writer")
	// The task sees its connection end.
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, rerr := io.Copy(io.Discard, client)
	if rerr != nil && !errors.Is(rerr, net.ErrClosed) && !strings.Contains(rerr.Error(), "reset") {
		t.Errorf("task read: %v", rerr)
	}
}

// Replies written at once and replies queued behind a full socket keep
// their order.
func TestTaskConnDirectAndQueuedWritesKeepOrder(t *testing.T) {
	tc, client := connPair(t, 8<<20)
	var want strings.Builder
	done := make(chan []byte, 1)
	go func() {
		_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(client)
		done <- b
	}()
	for i := range 3000 {
		line := fmt.Sprintf("%05d %s\n", i, strings.Repeat("x", i%997))
		want.WriteString(line)
		if err := tc.Send([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if string(got) != want.String() {
			t.Fatalf("task read %d bytes, want %d in order", len(got), want.Len())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader did not finish")
	}
}
