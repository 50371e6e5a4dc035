package pmix

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeProc writes a network namespace's tcp table and a process's fd
// directory holding the socket inodes ours.
func fakeProc(t *testing.T, table string, ours ...string) (netDir, fdDir string) {
	t.Helper()
	dir := t.TempDir()
	netDir, fdDir = filepath.Join(dir, "net"), filepath.Join(dir, "fd")
	for _, d := range []string{netDir, fdDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	if err := os.WriteFile(filepath.Join(netDir, "tcp"), []byte(header+table), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, ino := range append([]string{"0"}, ours...) {
		target := "socket:[" + ino + "]"
		if i == 0 {
			target = "/dev/null"
		}
		if err := os.Symlink(target, filepath.Join(fdDir, string(rune('3'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	return netDir, fdDir
}

// A connection to the server's listening port from a socket of another
// user is found; one of the server's user, of root, a closed one's
// remains, one to another port, and the server's own accepted end are
// not.
func TestForeignPeer(t *testing.T) {
	const (
		// 127.0.0.1:40000 listening, inode 100, the server's.
		listen = "   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 100 1 0\n"
		// The server's accepted end of a client's connection (inode 101).
		accepted = "   1: 0100007F:9C40 0100007F:D000 01 00000000:00000000 00:00000000 00000000  1000        0 101 1 0\n"
		// The client's end, of the server's user (1000).
		mine = "   2: 0100007F:D000 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 200 1 0\n"
		// root's tool.
		root = "   3: 0100007F:D001 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 201 1 0\n"
		// A closed socket's remains: TIME_WAIT, uid 0, inode 0.
		closed = "   4: 0100007F:D002 0100007F:9C40 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0\n"
		// User 4242, connected elsewhere (port 5000).
		elsewhere = "   5: 0100007F:D003 0100007F:1388 01 00000000:00000000 00:00000000 00000000  4242        0 202 1 0\n"
		// User 4242, connected to the server.
		theirs = "   6: 0100007F:D004 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  4242        0 203 1 0\n"
	)
	netDir, fdDir := fakeProc(t, listen+accepted+mine+root+closed+elsewhere, "100", "101")
	if uid, found, err := foreignPeer(netDir, fdDir, 1000); err != nil || found {
		t.Errorf("without another user's connection: uid %d, found %v, %v", uid, found, err)
	}
	netDir, fdDir = fakeProc(t, listen+accepted+mine+theirs, "100", "101")
	if uid, found, err := foreignPeer(netDir, fdDir, 1000); err != nil || !found || uid != 4242 {
		t.Errorf("with user 4242's connection: uid %d, found %v, %v; want 4242, true", uid, found, err)
	}
	// Not knowing the server's listening socket is an error, which
	// refuses.
	netDir, fdDir = fakeProc(t, listen+theirs, "999")
	if _, _, err := foreignPeer(netDir, fdDir, 1000); err == nil {
		t.Error("no listening socket of the server's, and no error")
	}
}
