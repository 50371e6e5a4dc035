package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// A cluster's name space across nodes, as two daemons on this machine
// play it: a hub (-listen) and a node's daemon that relays to it
// (-upstream, -node node-b), sharing a link key. Runs started against
// either daemon publish and look up each other's names (libpmi2 and
// MPICH), PMI2_Job_Connect to each other's jobs and read their keys (the
// hub reads them from the run's node through that node's own link), and
// a run killed on the node is seen gone at once by a peer on the hub's
// node. Another user on the node sees none of root's names; a daemon
// with the wrong key is refused and its callers are told why.
func TestDaemonHub(t *testing.T) {
	begin(t)
	dir := worldDir(t)
	hub, node, addr := startHub(t, dir)
	logs := func() string { return fmt.Sprintf("hub:\n%s\nnode:\n%s", hub.log.String(), node.log.String()) }

	t.Run("names", func(t *testing.T) {
		for _, c := range []struct {
			name, prog, serve, client, want string
			serveAt, clientAt               *nodeDaemon
		}{
			{"libpmi2", progs[clients.PMI2Test], "ns-serve", "ns-client", "step=xrun-ack value=ack-from-", node, hub},
			{"mpich", progs[clients.MPIPubname], "serve", "client", "step=xack value=ack-", hub, node},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				server := startRun(ctx, daemonArgv(c.serveAt.sock, "-n", "2", c.prog, c.serve), nil, nil, "")
				// The serving job shows in gopmi ps on the other node.
				waitFor(t, "the serving job in gopmi ps on the other node", func() bool {
					return strings.Contains(ask(t, nil, "ps", "-daemon", c.clientAt.sock), filepath.Base(c.prog))
				})
				client := startRun(ctx, daemonArgv(c.clientAt.sock, "-n", "1", c.prog, c.client), nil, nil, "")
				cr := client.wait(t, "the client run")
				sr := server.wait(t, "the serving run")
				if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(sr.Stdout, c.want) {
					t.Fatal(twoRuns(cr, sr, hub) + "\nnode:\n" + node.log.String())
				}
			})
		}
	})

	t.Run("connect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		server := startRun(ctx, daemonArgv(node.sock, "-n", "2", progs[clients.PMI2Test], "xconnect-serve"), nil, nil, "")
		client := startRun(ctx, daemonArgv(hub.sock, "-n", "1", progs[clients.PMI2Test], "xconnect-client"), nil, nil, "")
		cr := client.wait(t, "the client run")
		sr := server.wait(t, "the serving run")
		if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(cr.Stdout, " value=xv-1\n") {
			t.Fatal(twoRuns(cr, sr, hub) + "\nnode:\n" + node.log.String())
		}
	})

	// Open MPI's MPI_Comm_connect/accept between a run on node-b and one
	// on the hub's node: the port through the hub's names, the other
	// job's layout and data read through the hub from its node, and the
	// disconnect's fence of both runs' jobs completed at the hub.
	t.Run("openmpi-connect", func(t *testing.T) {
		if err := pmixShim(); err != nil {
			t.Fatal(err)
		}
		openMPIConnect(t, node.sock, hub.sock, hub, func() string { return "\nnode:\n" + node.log.String() })
	})

	t.Run("killed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		server := startRun(ctx, daemonArgv(node.sock, "-n", "2", progs[clients.PMI2Test], "xconnect-serve"), nil, nil, "")
		client := startRun(ctx, daemonArgv(hub.sock, "-n", "1", progs[clients.PMI2Test], "xconnect-hold"), nil, nil, "")
		waitFor(t, "the client's connection", func() bool {
			return strings.Contains(ask(t, nil, "query", "-daemon", node.sock, "gopmi.names"), "gopmi-xjob-connected")
		})
		pid := 0
		for _, j := range psJobs(t, nil, hub.sock) {
			if j.Size == 2 && j.State == "running" {
				pid = j.PID
			}
		}
		if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
			t.Fatalf("the serving run (pid %d) is not in gopmi ps, or cannot be killed:\n%s", pid, logs())
		}
		start := time.Now()
		cr := client.wait(t, "the client run")
		server.wait(t, "the killed run")
		if cr.ExitCode != 0 || !strings.Contains(cr.Stdout, "step=xjob-gone rc=") || time.Since(start) > 10*time.Second {
			t.Fatalf("after the serving run was killed on node-b, %s later: exit %d\n%s\n%s\n%s", time.Since(start).Round(time.Millisecond),
				cr.ExitCode, cr.Stdout, cr.Stderr, logs())
		}
		if !strings.Contains(hub.log.String(), fmt.Sprintf("lost: its process (pid %d) is gone", pid)) {
			t.Errorf("the hub did not end the killed run at once:\n%s", logs())
		}
	})

	t.Run("other-user", func(t *testing.T) {
		cred := testUser(t)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		server := startRun(ctx, daemonArgv(hub.sock, "-n", "1", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
		waitFor(t, "the name", func() bool {
			return strings.Contains(ask(t, nil, "query", "-daemon", node.sock, "gopmi.names"), "gopmi-xrun")
		})
		bin := copyExec(t, gopmiBin, dir)
		if names := askWith(t, bin, cred, "query", "-json", "-daemon", node.sock, "gopmi.names"); strings.Contains(names, "gopmi-xrun") {
			t.Errorf("another user on node-b sees root's names: %s", names)
		}
		client := startRun(ctx, daemonArgv(node.sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
		if cr := client.wait(t, "the client run"); cr.ExitCode != 0 {
			t.Fatalf("client: %s", cr.Stderr)
		}
		if sr := server.wait(t, "the serving run"); sr.ExitCode != 0 {
			t.Fatalf("server: %s", sr.Stderr)
		}
	})

	t.Run("wrong-key", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.key")
		if err := os.WriteFile(bad, []byte("not-the-key-of-this-cluster-at-all\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		d := startNodeDaemon(t, filepath.Join(dir, "c.sock"), "", "-upstream", addr, "-key", bad, "-node", "node-c")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := clients.Run(ctx, []string{gopmiBin, "ps", "-daemon", d.sock}, clients.RunOptions{})
		if err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, "which refuses it") || !strings.Contains(r.Stderr, "wrong proof") {
			t.Fatalf("gopmi ps through a daemon with the wrong key: %v, exit %d: %s", err, r.ExitCode, r.Stderr)
		}
		// The hub logs the refusal after it answered it.
		waitFor(t, "the hub's line about the refusal", func() bool { return strings.Contains(hub.log.String(), "hub: handshake refused") })
		// A run's lookup through it fails within the 10 s a run waits
		// for its daemon, not the lookup's 60 s, and the run says why.
		rctx, rcancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer rcancel()
		start := time.Now()
		r = startRun(rctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-peek"), nil, nil, "").wait(t, "a run through the daemon with the wrong key")
		took := time.Since(start)
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, "step=xrun-peek rc=") || strings.Contains(r.Stdout, "step=xrun-peek rc=0 ") ||
			took > 30*time.Second || !strings.Contains(r.Stderr, "wrong proof") {
			t.Fatalf("a lookup through a daemon with the wrong key, %s: exit %d\n%s\n%s", took.Round(time.Millisecond), r.ExitCode, r.Stdout, r.Stderr)
		}
	})
}

// startHub starts two daemons as on two nodes, with their sockets in dir:
// a hub, and node-b's daemon linked to it. It returns them and the hub's
// address.
func startHub(t *testing.T, dir string) (hub, node *nodeDaemon, addr string) {
	t.Helper()
	hub, addr, key := startHubAlone(t, dir)
	node = startNodeDaemon(t, filepath.Join(dir, "node.sock"), "", "-upstream", addr, "-key", key, "-node", "node-b")
	waitFor(t, "the node's link", func() bool { return strings.Contains(hub.log.String(), "hub: node linked") })
	return hub, node, addr
}

// startHubAlone runs a hub (with its state) in dir and returns it, its
// address and its link key's file.
func startHubAlone(t *testing.T, dir string) (hub *nodeDaemon, addr, key string) {
	t.Helper()
	key = filepath.Join(dir, "link.key")
	if err := os.WriteFile(key, []byte("c2VjcmV0LWtleS1mb3ItdGhlLWh1Yi10ZXN0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hub = startNodeDaemon(t, filepath.Join(dir, "hub.sock"), filepath.Join(dir, "hub-state"), "-listen", "127.0.0.1:0", "-key", key)
	waitFor(t, "the hub's address in its log", func() bool {
		m := regexp.MustCompile(`hub=(127\.0\.0\.1:\d+)`).FindStringSubmatch(hub.log.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return hub, addr, key
}

// psJob is one job of gopmi ps -json.
type psJob struct {
	Nspace string `json:"nspace"`
	PID    int    `json:"pid"`
	Size   int    `json:"size"`
	State  string `json:"state"`
}

// psJobs is gopmi ps -json against the daemon at sock.
func psJobs(t *testing.T, cred *syscall.Credential, sock string) []psJob {
	t.Helper()
	var jobs []psJob
	if err := json.Unmarshal([]byte(ask(t, cred, "ps", "-json", "-daemon", sock)), &jobs); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// aliasHolder keeps connections to a TCP address from many loopback
// addresses: aliasholder.py HOST:PORT ALIASES PER-ALIAS. It opens PER-ALIAS
// connections from each of 127.0.0.2 onwards, says "holding N" (how many
// the peer has not closed), and opens again each one the peer closes,
// until its stdin closes.
const aliasHolder = `import os, select, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
aliases, per = int(sys.argv[2]), int(sys.argv[3])
def dial(i):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i), 0))
    s.setblocking(False)
    try:
        s.connect((host, int(port)))
    except BlockingIOError:
        pass
    return s
socks = [(i, dial(i)) for i in range(aliases) for _ in range(per)]
said = False
while True:
    r, _, _ = select.select([sys.stdin] + [s for _, s in socks], [], [], 0.1)
    if sys.stdin in r:
        break
    kept = []
    for i, s in socks:
        if s in r:
            try:
                gone = s.recv(4096, socket.MSG_DONTWAIT) == b""
            except OSError:
                gone = True
            if gone:
                s.close()
                s = dial(i)
        kept.append((i, s))
    socks = kept
    if not said:
        time.sleep(0.5)
        r, _, _ = select.select([s for _, s in socks], [], [], 0)
        print("holding %d" % (len(socks) - len(r)), flush=True)
        said = True
`

// Another user holds connections to the hub from 40 loopback addresses,
// opening each again as the hub closes it (issue 31 item 7): before, each
// address counted as a host of its own and together they took every
// place the hub keeps for handshakes, so that no node's relay could link.
// Now on the hub's host a connection is its user's (the kernel's uid for
// its 4-tuple), and a relay connects from a privileged port, which takes
// root's places: the relay links while she holds hers, a run of root's
// through it publishes and another through the hub looks the name up,
// and the hub's log names her uid.
func TestHubHandshakesHeldByAnotherUser(t *testing.T) {
	begin(t)
	cred := testUser(t)
	dir := worldDir(t)
	hub, addr, key := startHubAlone(t, dir)
	holder := filepath.Join(dir, "aliasholder.py")
	if err := os.WriteFile(holder, []byte(aliasHolder), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := startAs(t, cred, dir, nil, "/usr/bin/python3", holder, addr, "40", "8")
	waitFor(t, "her connections", func() bool { return strings.Contains(out.String(), "holding ") })

	node := startNodeDaemon(t, filepath.Join(dir, "node.sock"), "", "-upstream", addr, "-key", key, "-node", "node-b")
	waitFor(t, "the relay's link to the hub", func() bool { return strings.Contains(hub.log.String(), "hub: node linked") })
	server := startRun(ctx, daemonArgv(node.sock, "-n", "1", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
	client := startRun(ctx, daemonArgv(hub.sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
	cr, sr := client.wait(t, "the client run on the hub"), server.wait(t, "the serving run on the relay")
	if cr.ExitCode != 0 || sr.ExitCode != 0 {
		t.Fatal(twoRuns(cr, sr, hub) + "\nrelay:\n" + node.log.String())
	}
	if want := fmt.Sprintf(`who="uid %d of this host"`, cred.Uid); !strings.Contains(hub.log.String(), "hub: too many handshakes at once") || !strings.Contains(hub.log.String(), want) {
		t.Errorf("the hub's log does not name her (%s):\n%s", want, hub.log.String())
	}
}
