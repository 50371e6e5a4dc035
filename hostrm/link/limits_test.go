package link

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// testBudget is one caller's budget: maxBytes and maxCalls, counted.
type testBudget struct {
	mu                 sync.Mutex
	bytes, calls       int
	maxBytes, maxCalls int
}

var errOver = errors.New("over the test budget")

func (b *testBudget) TakeBytes(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+n > b.maxBytes {
		return errOver
	}
	b.bytes += n
	return nil
}

func (b *testBudget) FreeBytes(n int) { b.mu.Lock(); b.bytes -= n; b.mu.Unlock() }

func (b *testBudget) TakeCall() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls >= b.maxCalls {
		return plugin.Errorf(plugin.ErrUnavailable, "%d calls in flight already", b.maxCalls)
	}
	b.calls++
	return nil
}

func (b *testBudget) FreeCall() { b.mu.Lock(); b.calls--; b.mu.Unlock() }

func (b *testBudget) held() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, b.calls
}

// holdingBackend's lookups wait until release closes.
type holdingBackend struct {
	plugin.Unimplemented
	release chan struct{}
}

func (*holdingBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "holding"}, nil
}

func (h *holdingBackend) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	select {
	case <-h.release:
		return &plugin.LookupResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serveLimited serves be on one end of a pipe within lim and returns the
// other end, and a channel closed when the server returned.
func serveLimited(t *testing.T, be plugin.Full, lim Limits) (net.Conn, chan struct{}) {
	t.Helper()
	srv, cli := net.Pipe()
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		ServeConnLimited(ctx, srv, be, nil, lim)
	}()
	t.Cleanup(func() {
		cancel()
		cli.Close()
		<-done
	})
	return cli, done
}

// A frame over MaxFrame closes the connection and is reported; what it
// held of the budget is given back.
func TestFrameOverLimit(t *testing.T) {
	b := &testBudget{maxBytes: 1 << 20, maxCalls: 4}
	refused := make(chan error, 1)
	lim := Limits{MaxFrame: 64 << 10, Budget: func(context.Context) Budget { return b }, Refused: func(_ context.Context, err error) { refused <- err }}
	cli, done := serveLimited(t, &holdingBackend{release: make(chan struct{})}, lim)
	go func() {
		// A value that never ends: the server must stop reading it.
		_, _ = cli.Write([]byte(`{"id":1,"call":"get_info","req":"` + strings.Repeat("x", 200<<10)))
	}()
	select {
	case err := <-refused:
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("refused with %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("a frame over the limit was not refused")
	}
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("the connection stayed open")
	}
	if bytes, calls := b.held(); bytes != 0 || calls != 0 {
		t.Fatalf("the budget holds %d bytes and %d calls after the connection closed", bytes, calls)
	}
}

// Calls past the budget's count are answered with its error at once, the
// others go on; bytes past it close the connection. Everything is given
// back once the calls are answered.
func TestBudgetBoundsCalls(t *testing.T) {
	b := &testBudget{maxBytes: 1 << 20, maxCalls: 2}
	h := &holdingBackend{release: make(chan struct{})}
	cli, _ := serveLimited(t, h, Limits{MaxFrame: 1 << 20, Budget: func(context.Context) Budget { return b }})
	c := NewConn(cli)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Backend().Lookup(ctx, &plugin.LookupRequest{Keys: []string{"k"}})
			errs <- err
		}()
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(time.Millisecond) {
		if _, calls := b.held(); calls == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two calls did not start")
		}
	}
	_, err := c.Backend().Lookup(ctx, &plugin.LookupRequest{Keys: []string{"k"}})
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "2 calls in flight already") {
		t.Fatalf("a third call: %v", err)
	}
	close(h.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(time.Millisecond) {
		if bytes, calls := b.held(); bytes == 0 && calls == 0 {
			break
		}
		if time.Now().After(deadline) {
			bytes, calls := b.held()
			t.Fatalf("the budget holds %d bytes and %d calls after every call was answered", bytes, calls)
		}
	}
	// A frame the budget's bytes cannot hold ends the connection.
	b.mu.Lock()
	b.maxBytes = 4 << 10
	b.mu.Unlock()
	_, err = c.Backend().Lookup(ctx, &plugin.LookupRequest{Keys: []string{strings.Repeat("k", 8<<10)}})
	if !errors.Is(err, plugin.ErrUnavailable) {
		t.Fatalf("a call over the budget's bytes: %v", err)
	}
}
