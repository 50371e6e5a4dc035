package pmiclient

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gopmi/gopmi/bridge/wire"
)

func TestRcErrorKeepsClientUsable(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte {
		if m.Cmd == "put" {
			return line("put_result", "rc", "4", "msg", "key too long")
		}
		return line("finalize_ack", "rc", "0")
	})
	c := New(conn)
	err := c.Put(ctx, "", "k", "v")
	var pe *Error
	if !errors.As(err, &pe) || pe.Rc != wire.RcInvalidKey || pe.Msg != "key too long" {
		t.Fatalf("Put err = %v", err)
	}
	if got, want := err.Error(), "pmi put: rc=4 (PMI_ERR_INVALID_KEY): key too long"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Errorf("Finalize after an rc error: %v", err)
	}
}

func TestWrongReplyBreaksClient(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte { return line("something_else", "rc", "0") })
	c := New(conn)
	if _, err := c.GetAppnum(ctx); !errors.Is(err, ErrProtocol) {
		t.Fatalf("GetAppnum err = %v, want ErrProtocol", err)
	}
	if _, err := c.GetAppnum(ctx); !errors.Is(err, ErrBroken) {
		t.Fatalf("second call err = %v, want ErrBroken", err)
	}
}

func TestMissingAttribute(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte { return line("appnum", "rc", "0") })
	if _, err := New(conn).GetAppnum(ctx); !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v, want ErrProtocol", err)
	}
}

// silent never answers.
func silent(*wire.Message) []byte { return nil }

func TestDeadline(t *testing.T) {
	conn, _ := startFake(t, silent)
	c := New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetAppnum(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("call took %v", d)
	}
	if err := c.Barrier(ctxT(t)); !errors.Is(err, ErrBroken) {
		t.Errorf("after a timeout: err = %v, want ErrBroken", err)
	}
}

func TestCancel(t *testing.T) {
	conn, _ := startFake(t, silent)
	c := New(conn)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.GetAppnum(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not interrupt the call")
	}
}

func TestDefaultTimeout(t *testing.T) {
	conn, _ := startFake(t, silent)
	c := New(conn)
	c.SetTimeout(30 * time.Millisecond)
	_, err := c.GetAppnum(context.Background())
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want os.ErrDeadlineExceeded", err)
	}
}

func TestAlreadyDoneContext(t *testing.T) {
	conn, srv := startFake(t, hydra1)
	c := New(conn)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Barrier(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("a dead context still sent %d requests", n)
	}
	// Nothing was exchanged, so the client stays usable.
	if _, err := c.GetAppnum(ctxT(t)); err != nil {
		t.Errorf("after a refused call: %v", err)
	}
}

func TestServerClosesMidReply(t *testing.T) {
	ctx := ctxT(t)
	var srv *fakeServer
	conn, srv := startFake(t, func(*wire.Message) []byte {
		// net.Pipe hands these bytes straight to the client's read.
		_, _ = srv.conn.Write([]byte("cmd=appnum appn"))
		srv.conn.Close()
		return nil
	})
	if _, err := New(conn).GetAppnum(ctx); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed (closed mid-message)", err)
	}
}
