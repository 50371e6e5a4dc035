package grpcplugin_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// TestHandshakeByHandAndClosedStderr plays the host by hand, as a non-Go
// host would: it sets go-plugin's variables, reads the handshake line and
// dials the announced socket with Dial (which needs go-plugin's health
// service). Then it closes the plugin's stderr and makes it log: the
// plugin must survive the broken pipe (Serve ignores SIGPIPE), which is
// what lets a plugin outlive a host that goes away first.
func TestHandshakeByHandAndClosedStderr(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		envPlugin+"=1", noRaceExitSleep,
		grpcplugin.Handshake.MagicCookieKey+"="+grpcplugin.Handshake.MagicCookieValue,
		fmt.Sprintf("PLUGIN_PROTOCOL_VERSIONS=%d", grpcplugin.Handshake.ProtocolVersion),
		"PLUGIN_UNIX_SOCKET_DIR="+t.TempDir(),
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()

	lines := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(s)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("no handshake line in 30s")
	}
	parts := strings.Split(line, "|")
	if len(parts) < 5 || parts[0] != "1" || parts[1] != "1" || parts[2] != "unix" || parts[4] != "grpc" {
		t.Fatalf("handshake line %q; want 1|1|unix|<path>|grpc", line)
	}

	c, err := direct.Dial(testCtx(t), "unix://"+parts[3])
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	b := c.Backend()
	if info, err := b.GetInfo(testCtx(t)); err != nil || info.Name != "testrm" {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}

	stderr.Close()
	for i := range 3 {
		if _, err := b.Fence(testCtx(t), &plugin.FenceRequest{ID: "log"}); err != nil {
			t.Fatalf("Fence %d (logging to a closed stderr): %v", i, err)
		}
	}
	if _, err := b.Fence(testCtx(t), &plugin.FenceRequest{ID: "echo"}); err != nil {
		t.Fatalf("plugin did not survive logging to a closed stderr: %v", err)
	}
}
