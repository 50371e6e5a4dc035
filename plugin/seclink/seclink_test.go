package seclink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testKey  = "0123456789abcdef0123456789abcdef"
	otherKey = "fedcba9876543210fedcba9876543210"
)

func acceptor(key string) *Config {
	return &Config{Key: []byte(key), Role: "coordinator", PeerRole: "node"}
}

func dialler(key string) *Config {
	return &Config{Key: []byte(key), Role: "node", PeerRole: "coordinator"}
}

// pair runs both ends of a handshake over a pipe.
func pair(t *testing.T, srv, cli *Config, hello string) (sc *Conn, serr error, cc *Conn, cerr error) {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		defer close(done)
		if sc, serr = Server(ctx, a, srv); serr != nil {
			a.Close()
		}
	}()
	if cc, cerr = Client(ctx, b, cli, []byte(hello)); cerr != nil {
		b.Close()
	}
	<-done
	// The pipes, not the TLS sessions: a session's Close waits for its
	// peer to read the closing alert, which nobody reads here.
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return
}

// Both ends prove the key: the acceptor hears the hello, each end knows
// the other's role, and what either writes right after the handshake
// (gRPC's first frames) is read whole by the other.
func TestHandshake(t *testing.T) {
	sc, serr, cc, cerr := pair(t, acceptor(testKey), dialler(testKey), `{"node":"n2"}`)
	if serr != nil || cerr != nil {
		t.Fatalf("acceptor: %v, dialler: %v", serr, cerr)
	}
	if string(sc.Hello()) != `{"node":"n2"}` || sc.PeerRole() != "node" || cc.PeerRole() != "coordinator" {
		t.Fatalf("hello %q, roles %q %q", sc.Hello(), sc.PeerRole(), cc.PeerRole())
	}
	if v := sc.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("TLS version %x", v)
	}
	go func() { _, _ = io.WriteString(sc, "from the acceptor\n") }()
	if line, err := bufio.NewReader(cc).ReadString('\n'); err != nil || line != "from the acceptor\n" {
		t.Fatalf("the dialler read %q, %v", line, err)
	}
	go func() { _, _ = io.WriteString(cc, "from the dialler\n") }()
	if line, err := bufio.NewReader(sc).ReadString('\n'); err != nil || line != "from the dialler\n" {
		t.Fatalf("the acceptor read %q, %v", line, err)
	}
}

// A wrong key on either side is refused at both ends, with the reason.
func TestWrongKey(t *testing.T) {
	for _, c := range []struct{ name, srv, cli string }{{"dialler's", testKey, otherKey}, {"acceptor's", otherKey, testKey}} {
		_, serr, _, cerr := pair(t, acceptor(c.srv), dialler(c.cli), "")
		if !errors.Is(serr, ErrRefused) || !strings.Contains(serr.Error(), "wrong proof: the node does not hold the key") {
			t.Errorf("%s key wrong, acceptor: %v", c.name, serr)
		}
		if !errors.Is(cerr, ErrRefused) || !errors.Is(cerr, plugin.ErrPermission) || !strings.Contains(cerr.Error(), "refused by the coordinator: wrong proof") {
			t.Errorf("%s key wrong, dialler: %v", c.name, cerr)
		}
	}
	if _, err := NewDialer(Config{Key: []byte("short"), Role: "node", PeerRole: "hub"}, nil); !errors.Is(err, plugin.ErrInvalidArgument) {
		t.Errorf("a 5-byte key: %v", err)
	}
}

// fakeAcceptor is an acceptor without the key: it says it is role, with
// nonce, hands the dialler's line to heard and answers answer(line).
func fakeAcceptor(t *testing.T, c net.Conn, role, nonce string, heard chan<- string, answer func(line string) string) {
	t.Helper()
	cfg, err := serverTLS()
	if err != nil {
		t.Error(err)
		return
	}
	tc := tls.Server(c, cfg)
	defer tc.Close()
	if _, err := io.WriteString(tc, Proto+" "+role+" "+nonce+"\n"); err != nil {
		heard <- ""
		return
	}
	line, _ := bufio.NewReader(tc).ReadString('\n')
	heard <- line
	_, _ = io.WriteString(tc, answer(line))
}

// realAcceptor runs Server with cfg on a pipe: it returns the other end,
// and the acceptor's result once it is done.
func realAcceptor(cfg *Config) (net.Conn, <-chan error) {
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sc, err := Server(ctx, a, cfg)
		if sc != nil {
			sc.Close()
		}
		a.Close()
		done <- err
	}()
	return b, done
}

const someNonce = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// Roles are part of every proof: an end of another role is not taken for
// the one wanted, a dialler's own proof reflected back to it does not
// pass for the acceptor's, and a node's proof does not pass as a
// tree child's.
func TestRoleConfusion(t *testing.T) {
	// A tree parent (it holds the key) is not the coordinator.
	tp := &Config{Key: []byte(testKey), Role: "tree-parent", PeerRole: "node"}
	if _, _, _, err := pair(t, tp, dialler(testKey), ""); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not a coordinator: it says it is a tree-parent") {
		t.Errorf("a tree parent taken for the coordinator: %v", err)
	}
	// A tree child (it holds the key) is not served where nodes are.
	tc := &Config{Key: []byte(testKey), Role: "tree-child", PeerRole: "coordinator"}
	if _, err, _, _ := pair(t, acceptor(testKey), tc, ""); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "a tree-child is not served here, only a node") {
		t.Errorf("a tree child served as a node: %v", err)
	}

	// An impostor coordinator, without the key, reflects the node's own
	// proof back as its answer.
	a, b := net.Pipe()
	heard := make(chan string, 1)
	go fakeAcceptor(t, a, "coordinator", someNonce, heard, func(line string) string {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			return "ok x\n"
		}
		return "ok " + f[2] + "\n"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Client(ctx, b, dialler(testKey), nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the coordinator does not prove it holds the key") {
		t.Errorf("a coordinator that reflects the node's proof: %v", err)
	}
	b.Close()
	<-heard

	// A node's proof, made with the key for the role node, sent under
	// the role tree-child to a tree parent that wants tree children.
	parent := &Config{Key: []byte(testKey), Role: "tree-parent", PeerRole: "tree-child"}
	conn, done := realAcceptor(parent)
	tcl := tls.Client(conn, clientTLS(nil))
	r := bufio.NewReader(tcl)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	theirs := strings.Fields(line)[2]
	binding, _ := bindingOf(tcl)
	p := proof([]byte(testKey), byDialler, "node", "tree-parent", theirs, someNonce, binding, nil)
	_, _ = io.WriteString(tcl, "tree-child "+someNonce+" "+p+" \n")
	answer, _ := r.ReadString('\n')
	if err := <-done; !errors.Is(err, ErrRefused) || !strings.HasPrefix(answer, "refused wrong proof") {
		t.Errorf("a node's proof as a tree child's: %v, answer %q", err, answer)
	}
	tcl.Close()
}

// A dialler's line, heard by an impostor acceptor, replayed to the real
// one in a session of its own is refused.
func TestReplay(t *testing.T) {
	a, b := net.Pipe()
	heard := make(chan string, 1)
	go fakeAcceptor(t, a, "coordinator", someNonce, heard, func(string) string { return "ok 00\n" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Client(ctx, b, dialler(testKey), []byte("me")); !errors.Is(err, ErrRefused) {
		t.Errorf("an impostor acceptor: %v", err)
	}
	b.Close()
	recorded := <-heard

	conn, done := realAcceptor(acceptor(testKey))
	tcl := tls.Client(conn, clientTLS(nil))
	r := bufio.NewReader(tcl)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(tcl, recorded)
	answer, _ := r.ReadString('\n')
	if err := <-done; !errors.Is(err, ErrRefused) || !strings.HasPrefix(answer, "refused wrong proof") {
		t.Errorf("a replayed hello: acceptor %v, answer %q", err, answer)
	}
	tcl.Close()
}

// A relay in the middle holds a TLS session with each end and passes
// the handshake's lines between them unchanged: both ends refuse, since
// the two sessions export different keying material.
func TestRelayInTheMiddle(t *testing.T) {
	nodeEnd, mitmNode := net.Pipe()
	mitmCoord, done := realAcceptor(acceptor(testKey))
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		scfg, _ := serverTLS()
		toCoord := tls.Client(mitmCoord, clientTLS(nil))
		toNode := tls.Server(mitmNode, scfg)
		defer toCoord.Close()
		defer toNode.Close()
		cr, nr := bufio.NewReader(toCoord), bufio.NewReader(toNode)
		pass := func(r *bufio.Reader, w io.Writer) error {
			l, err := r.ReadString('\n')
			_, _ = io.WriteString(w, l)
			return err
		}
		if pass(cr, toNode) == nil && pass(nr, toCoord) == nil {
			_ = pass(cr, toNode)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, cerr := Client(ctx, nodeEnd, dialler(testKey), []byte("n2"))
	nodeEnd.Close()
	serr := <-done
	<-relayed
	if !errors.Is(serr, ErrRefused) || !strings.Contains(serr.Error(), "wrong proof") || !errors.Is(cerr, ErrRefused) {
		t.Errorf("a relay in the middle passed: acceptor %v, dialler %v", serr, cerr)
	}
}

// listen serves cfg on loopback with a Listener until the test ends.
func listen(t *testing.T, inner net.Listener, cfg Config) (*Listener, *plugintest.Buffer) {
	t.Helper()
	if inner == nil {
		var err error
		if inner, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	var log plugintest.Buffer
	l, err := Listen(inner, cfg, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, &log
}

// acceptOne accepts one connection in the background.
func acceptOne(l net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			c = nil
		}
		ch <- c
	}()
	return ch
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Over TCP: a node with the key gets through while a silent peer holds
// its place, which the listener drops at its deadline and logs; one with
// the wrong key is refused and logged; one that closes at once is logged
// at debug level only.
func TestListener(t *testing.T) {
	cfg := *acceptor(testKey)
	cfg.Timeout, cfg.TLSTimeout = 600*time.Millisecond, 300*time.Millisecond
	l, log := listen(t, nil, cfg)
	addr := l.Addr().String()

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	got := acceptOne(l)
	d, err := NewDialer(*dialler(testKey), []byte("n1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("a node with the key: %v", err)
	}
	sc := <-got
	if sc == nil || string(sc.(*Conn).Hello()) != "n1" {
		t.Fatalf("accepted %v", sc)
	}
	sc.Close()
	c.Close()
	// The silent peer is dropped at its deadline.
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := silent.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the silent peer was not dropped: %v", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("the silent peer was dropped after %s", waited)
	}
	eventually(t, "the silent peer's line", func() bool { return strings.Contains(log.String(), "deadline") })

	bad, _ := NewDialer(*dialler(otherKey), nil)
	if _, err := bad.Dial(ctx, addr); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "coordinator "+addr+": refused by the coordinator: wrong proof") {
		t.Fatalf("a node with the wrong key: %v", err)
	}
	eventually(t, "the refusal's line", func() bool {
		return strings.Contains(log.String(), `"level":"warn"`) && strings.Contains(log.String(), "wrong proof")
	})

	before := strings.Count(log.String(), "\n")
	quitter, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	quitter.Close()
	eventually(t, "the quitter's line", func() bool { return strings.Count(log.String(), "\n") > before })
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"level":"debug"`) {
		t.Errorf("a peer that closed before answering: %s", last)
	}
}

// A hello longer than MaxHello is refused at both ends: the dialler does
// not send it, the acceptor does not read it.
func TestOversizedHello(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := net.Pipe()
	if _, err := Client(ctx, a, dialler(testKey), bytes.Repeat([]byte("x"), MaxHello+1)); !errors.Is(err, plugin.ErrInvalidArgument) {
		t.Errorf("a long hello sent: %v", err)
	}
	a.Close()
	b.Close()

	conn, done := realAcceptor(acceptor(testKey))
	tcl := tls.Client(conn, clientTLS(nil))
	r := bufio.NewReader(tcl)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(tcl, "node "+strings.Repeat("y", 2*maxLine)+"\n") }()
	answer, _ := r.ReadString('\n')
	if err := <-done; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "longer than") || !strings.HasPrefix(answer, "refused hello longer than") {
		t.Errorf("a long hello read: %v, answer %q", err, answer)
	}
	tcl.Close()
}

// A dialler's deadline ends its handshake with an acceptor that never
// answers, as a time-out.
func TestDiallerDeadline(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := inner.Accept()
		if err == nil {
			held <- c
		}
	}()
	d, _ := NewDialer(*dialler(testKey), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := d.Dial(ctx, inner.Addr().String()); !errors.Is(err, plugin.ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Errorf("a silent acceptor: %v after %s", err, time.Since(start))
	}
	(<-held).Close()
}

// flakyListener fails its first Accept as when out of file descriptors.
type flakyListener struct {
	net.Listener
	once sync.Once
}

func (l *flakyListener) Accept() (net.Conn, error) {
	var err error
	l.once.Do(func() {
		err = &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	})
	if err != nil {
		return nil, err
	}
	return l.Listener.Accept()
}

// Running out of file descriptors once does not stop a Listener.
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, log := listen(t, &flakyListener{Listener: raw}, *acceptor(testKey))
	got := acceptOne(l)
	d, _ := NewDialer(*dialler(testKey), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, raw.Addr().String())
	if err != nil {
		t.Fatalf("dial after a failed accept: %v", err)
	}
	c.Close()
	if sc := <-got; sc == nil {
		t.Fatal("Accept failed")
	} else {
		sc.Close()
	}
	if !strings.Contains(log.String(), "accept failed; retrying") {
		t.Errorf("the failed accept was not logged: %s", log.String())
	}
}

// A second link to the same acceptor resumes the first TLS session, and
// still proves the key anew.
func TestResumption(t *testing.T) {
	l, _ := listen(t, nil, *acceptor(testKey))
	d, _ := NewDialer(*dialler(testKey), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 2 {
		got := acceptOne(l)
		c, err := d.Dial(ctx, l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// The ticket comes after the handshake: a read takes it in.
		sc := <-got
		go func() { _, _ = io.WriteString(sc, "x") }()
		_, _ = c.Read(make([]byte, 1))
		if resumed := c.(*Conn).ConnectionState().DidResume; resumed != (i == 1) {
			t.Errorf("link %d resumed: %v", i, resumed)
		}
		c.Close()
		sc.Close()
	}
}

// benchmarkDial makes links to a Listener on loopback, one after the
// other: what a link costs both ends, TCP connect included.
func benchmarkDial(b *testing.B, resume bool) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	l, err := Listen(inner, *acceptor(testKey), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	d, _ := NewDialer(*dialler(testKey), nil)
	for b.Loop() {
		if !resume {
			d, _ = NewDialer(*dialler(testKey), nil)
		}
		c, err := d.Dial(ctx, inner.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		_, _ = c.Read(make([]byte, 1)) // takes the session ticket in, until the acceptor closes
		c.Close()
	}
}

func BenchmarkDial(b *testing.B)        { benchmarkDial(b, false) }
func BenchmarkDialResumed(b *testing.B) { benchmarkDial(b, true) }
