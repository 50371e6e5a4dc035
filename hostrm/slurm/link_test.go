package slurm

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
	"github.com/gopmi/gopmi/plugin/seclink"
)

// selfSigned is a TLS server configuration with a certificate made for
// the test, as an impostor makes one.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := seclink.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// impostor listens on loopback as a peer of role that does not hold the
// step secret: it speaks the link's handshake, takes any proof and
// answers one it made up. heard gets everything each connection sent
// after the TLS handshake, once it closed.
func impostor(t *testing.T, role string) (addr string, heard <-chan string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := selfSigned(t)
	out := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				tc := tls.Server(c, cfg)
				if _, err := io.WriteString(tc, seclink.Proto+" "+role+" "+strings.Repeat("ab", 32)+"\n"); err != nil {
					return
				}
				r := bufio.NewReader(tc)
				line, _ := r.ReadString('\n')
				_, _ = io.WriteString(tc, "ok "+strings.Repeat("0", 64)+"\n")
				rest, _ := io.ReadAll(r)
				select {
				case out <- line + string(rest):
				default:
				}
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String(), out
}

// A coordinator that cannot prove the step secret is refused by the node
// with a clear error, and hears nothing of the node's calls.
func TestImpostorCoordinator(t *testing.T) {
	addr, heard := impostor(t, RoleCoordinator)
	env := map[string]string{EnvSecret: testSecret}
	n := newNode([]string{"-coordinator", addr}, func(k string) string { return env[k] })
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: "j", Rank: 0}, Data: []plugin.Info{{Key: "secret-name", Value: "secret-value"}}})
	t.Logf("the node says: %v", err)
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "the coordinator does not prove it holds the key") {
		t.Fatalf("a node's call to an impostor coordinator: %v", err)
	}
	select {
	case got := <-heard:
		if strings.Contains(got, "secret-value") || strings.Contains(got, "PRI * HTTP/2.0") {
			t.Errorf("the impostor heard a call: %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Error("the impostor heard no handshake")
	}
}

// A tree child talks to no parent that cannot prove the step secret,
// nor to an end that proves it in another role: the coordinator's, or
// another node's of the same step (several nodes on one host).
func TestImpostorTreeParent(t *testing.T) {
	job := plugin.Job{Nspace: "slurm.9.0", Size: 3, Nodes: []plugin.Node{{ID: 0, Name: "n1", Ranks: []int32{0}, Addr: "127.0.0.1"},
		{ID: 1, Name: "n2", Ranks: []int32{1}, Addr: "127.0.0.1"}, {ID: 2, Name: "n3", Ranks: []int32{2}, Addr: "127.0.0.1"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listenAs := func(wrap func(net.Listener) (net.Listener, error)) (net.Listener, int) {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := wrap(raw)
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = direct.Serve(sctx, l, &plugintest.Fake{})
		}()
		t.Cleanup(func() { stop(); <-served })
		return l, raw.Addr().(*net.TCPAddr).Port
	}
	_, coordPort := listenAs(func(l net.Listener) (net.Listener, error) { return AuthListener(l, testSecret, zerolog.Nop()) })
	_, otherPort := listenAs(func(l net.Listener) (net.Listener, error) {
		return overlay.Listen(l, testSecret, overlay.ParentRole(job.Nspace, 1), overlay.RoleTreeChild, zerolog.Nop())
	})
	fake, _ := impostor(t, overlay.ParentRole(job.Nspace, 0))
	_, fakePort, _ := net.SplitHostPort(fake)
	port, _ := strconv.Atoi(fakePort)

	for _, c := range []struct {
		name string
		port int
		want string
	}{
		{"an impostor parent", port, "the " + overlay.ParentRole(job.Nspace, 0) + " does not prove it holds the key"},
		{"the coordinator's role", coordPort, "not a " + overlay.ParentRole(job.Nspace, 0) + ": it says it is a coordinator"},
		{"another node of the step", otherPort, "not a " + overlay.ParentRole(job.Nspace, 0) + ": it says it is a " + overlay.ParentRole(job.Nspace, 1)},
	} {
		if c.port+overlay.PortTries > 65535 {
			t.Skipf("port %d: no room for a range of %d", c.port, overlay.PortTries)
		}
		if q := slices.IndexFunc([]int{port, coordPort, otherPort}, func(q int) bool { return q != c.port && q >= c.port && q < c.port+overlay.PortTries }); q >= 0 {
			// Another of the test's listeners is in this range: which
			// refusal comes first is the port order's.
			t.Logf("%s: another listener in ports %d-%d; not checked", c.name, c.port, c.port+overlay.PortTries-1)
			continue
		}
		_, err := overlay.DialNode(ctx, job, testSecret, overlay.PortRange{Low: c.port, High: c.port + overlay.PortTries - 1}, 0, time.Second, false)
		if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "fence tree: node n1") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
