package coord

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
	"github.com/gopmi/gopmi/plugin/seclink"
)

// middleTLS is the TLS configuration of a relay in the middle: a
// certificate it made itself.
func middleTLS(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := seclink.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A relay in the middle between a node and its coordinator, which holds
// a TLS session with each and passes what one says to the other
// unchanged, gets no link made: the two sessions export different
// keying material, so the node's proof fails at the coordinator, which
// refuses and logs it, and the node hears the refusal.
func TestRelayInTheMiddle(t *testing.T) {
	var log plugintest.Buffer
	_, coordAddr := startCoordinator(t, Options{Secret: rightSecret, Logger: zerolog.New(&log)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := middleTLS(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", coordAddr)
				if err != nil {
					return
				}
				defer up.Close()
				toNode := tls.Server(c, cfg)
				toCoord := tls.Client(up, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // the relay in the middle takes anything
				if toNode.Handshake() != nil || toCoord.Handshake() != nil {
					return
				}
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					_ = dst.Close()
					_ = src.Close()
					done <- struct{}{}
				}
				go pipe(toNode, toCoord)
				go pipe(toCoord, toNode)
				<-done
				<-done
			})
		}
	})
	defer func() {
		l.Close()
		wg.Wait()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := direct.Dial(ctx, l.Addr().String(), direct.WithDialer(slurm.AuthDialer(rightSecret)))
	if err == nil {
		c.Close()
		t.Fatal("a node linked to its coordinator through a relay in the middle")
	}
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "refused by the coordinator: wrong proof") {
		t.Errorf("through a relay in the middle, the node says: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "wrong proof"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator did not log the refusal: %s", log.String())
		}
	}
}
