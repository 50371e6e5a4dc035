package pmiclient

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeServer answers a client over net.Pipe: it reads PMI-1 frames until
// a PMI-2 init line, PMI-2 frames after, and writes whatever handle
// returns (raw bytes, so tests control framing, alignment and pipelining).
type fakeServer struct {
	handle func(m *wire.Message) []byte

	mu   sync.Mutex
	reqs []*wire.Message // guarded by mu
	raw  [][]byte        // guarded by mu: frames as read
	done chan struct{}
	conn net.Conn
}

// startFake returns the client end of a pipe served by handle. The
// server stops when the client end closes; cleanup waits for it.
func startFake(t *testing.T, handle func(m *wire.Message) []byte) (net.Conn, *fakeServer) {
	t.Helper()
	cli, srv := net.Pipe()
	f := &fakeServer{handle: handle, done: make(chan struct{}), conn: srv}
	go f.serve()
	t.Cleanup(func() {
		cli.Close()
		srv.Close()
		<-f.done
	})
	return cli, f
}

func (f *fakeServer) serve() {
	defer close(f.done)
	var s1 pmi1.Splitter
	var s2 pmi2.Splitter
	fr := wire.NewFrameReader(f.conn, s1.Split)
	v2 := false
	for {
		frame, err := fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) {
				return
			}
			continue
		}
		var m *wire.Message
		if v2 {
			m, err = pmi2.Parse(frame)
		} else {
			m, err = pmi1.Parse(frame)
		}
		if err != nil {
			continue
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, m)
		f.raw = append(f.raw, append([]byte(nil), frame...))
		f.mu.Unlock()
		if !v2 && m.Cmd == "init" && m.Value("pmi_version") == "2" {
			v2 = true
			fr.SetSplit(s2.Split)
		}
		if out := f.handle(m); len(out) > 0 {
			if _, err := f.conn.Write(out); err != nil {
				return
			}
		}
	}
}

func (f *fakeServer) requests() []*wire.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wire.Message(nil), f.reqs...)
}

func (f *fakeServer) frames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.raw))
	for i, r := range f.raw {
		out[i] = string(r)
	}
	return out
}

func line(cmd string, kv ...string) []byte { return pmi1.Encode(wire.New(cmd, kv...)) }

func frame2(cmd string, kv ...string) []byte { return pmi2.Encode(wire.New(cmd, kv...)) }
