package pmix

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/plugin/peercred"
)

// fakeProc writes a network namespace's tcp table and a process's fd
// directory: fd 3 is /dev/null, then fd 4, 5, ... the sockets ours.
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

// The server's connections whose peer is another user's, or not on this
// host, are intruders; those of the server's user, of root, a closed
// one's remains and the listening socket itself are not.
func TestIntruders(t *testing.T) {
	const (
		// 127.0.0.1:40000 listening, inode 100, the server's.
		listen = "   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 100 1 0\n"
		// A client of the server's user: its end (inode 200) and the
		// server's (inode 101).
		mine    = "   1: 0100007F:D000 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 200 1 0\n"
		mineAcc = "   2: 0100007F:9C40 0100007F:D000 01 00000000:00000000 00:00000000 00000000  1000        0 101 1 0\n"
		// root's tool, and the server's end (inode 102).
		root    = "   3: 0100007F:D001 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 201 1 0\n"
		rootAcc = "   4: 0100007F:9C40 0100007F:D001 01 00000000:00000000 00:00000000 00000000  1000        0 102 1 0\n"
		// A closed client's remains (TIME_WAIT, inode 0) and the
		// server's end, which libpmix closes (CLOSE_WAIT).
		closed    = "   5: 0100007F:D002 0100007F:9C40 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0\n"
		closedAcc = "   6: 0100007F:9C40 0100007F:D002 08 00000000:00000000 00:00000000 00000000  1000        0 103 1 0\n"
		// User 4242's client, and the server's end (inode 104).
		theirs    = "   7: 0100007F:D004 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  4242        0 203 1 0\n"
		theirsAcc = "   8: 0100007F:9C40 0100007F:D004 01 00000000:00000000 00:00000000 00000000  1000        0 104 1 0\n"
		// A peer not on this host's table (inode 105).
		away = "   9: 0100007F:9C40 0100007F:D005 01 00000000:00000000 00:00000000 00000000  1000        0 105 1 0\n"
	)
	table := listen + mine + mineAcc + root + rootAcc + closed + closedAcc
	netDir, fdDir := fakeProc(t, table, "100", "101", "102", "103")
	l, err := listeners(netDir, fdDir)
	if err != nil || len(l) != 1 || l[0].Port != 40000 {
		t.Fatalf("listeners = %v, %v; want 127.0.0.1:40000", l, err)
	}
	// Where sock_diag cannot answer, the table does.
	noDiag := func(_, _ *net.TCPAddr) (peercred.Socket, error) { return peercred.Socket{}, errors.New("no sock_diag") }
	if in, err := intruders(netDir, fdDir, 1000, l, noDiag); err != nil || len(in) != 0 {
		t.Errorf("without another user's connection: %+v, %v", in, err)
	}
	netDir, fdDir = fakeProc(t, table+theirs+theirsAcc+away, "100", "101", "102", "103", "104", "105")
	in, err := intruders(netDir, fdDir, 1000, l, noDiag)
	if err != nil || len(in) != 2 || in[0] != (intruder{fd: 8, inode: 104, uid: 4242}) || in[1] != (intruder{fd: 9, inode: 105, uid: -1}) {
		t.Errorf("intruders = %+v, %v; want user 4242's (fd 8) and the one not on this host (fd 9)", in, err)
	}
	// The kernel, asked by 4-tuple, knows better than a table read in
	// pages: a client of the server's user the table missed (its line
	// gone, mineAcc's kept) is no intruder; nor is a connection whose
	// peer just closed (this end no longer established); one whose peer
	// is absent while this end is established is not on this host.
	diag := func(local, remote *net.TCPAddr) (peercred.Socket, error) {
		switch {
		case local.Port == 0xD000: // mine's client end
			return peercred.Socket{State: peercred.TCPEstablished, UID: 1000, Inode: 200}, nil
		case local.Port == 0xD004: // theirs
			return peercred.Socket{State: peercred.TCPEstablished, UID: 4242, Inode: 203}, nil
		case local.Port == 0x9C40 && remote.Port == 0xD001: // root's accepted end: now closing
			return peercred.Socket{State: "08", UID: 1000, Inode: 102}, nil
		case local.Port == 0x9C40 && remote.Port == 0xD005: // away's accepted end, established
			return peercred.Socket{State: peercred.TCPEstablished, UID: 1000, Inode: 105}, nil
		}
		return peercred.Socket{}, peercred.ErrNoSocket
	}
	netDir, fdDir = fakeProc(t, listen+mineAcc+rootAcc+theirs+theirsAcc+away, "100", "101", "102", "104", "105")
	in, err = intruders(netDir, fdDir, 1000, l, diag)
	if err != nil || len(in) != 2 || in[0] != (intruder{fd: 7, inode: 104, uid: 4242}) || in[1] != (intruder{fd: 8, inode: 105, uid: -1}) {
		t.Errorf("intruders by sock_diag = %+v, %v; want user 4242's (fd 7) and the one not on this host (fd 8)", in, err)
	}
	// Not knowing the server's listening socket is an error, which
	// refuses.
	netDir, fdDir = fakeProc(t, listen+theirs, "999")
	if _, err := listeners(netDir, fdDir); err == nil {
		t.Error("no listening socket of the server's, and no error")
	}
}

// pendingWrites counts the registrations of level-triggered epoll
// instances that ask to write (libevent's, with something queued), not
// the Go runtime's, which are edge-triggered for reading and writing.
func TestPendingWrites(t *testing.T) {
	dir := t.TempDir()
	fdDir, infoDir := filepath.Join(dir, "fd"), filepath.Join(dir, "fdinfo")
	for _, d := range []string{fdDir, infoDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(fd, target, info string) {
		if err := os.Symlink(target, filepath.Join(fdDir, fd)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(infoDir, fd), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const head = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\n"
	// Go's netpoller: edge-triggered, reading and writing.
	write("6", "anon_inode:[eventpoll]", head+"tfd:        5 events: 8000201d data: 3f916e392e000006  pos:145 ino:f0000100 sdev:15\n"+
		"tfd:        7 events:       19 data:          12aeb48  pos:0 ino:40e sdev:10\n")
	// libevent's: client 21 reading only, client 20 with a write queued.
	write("11", "anon_inode:[eventpoll]", head+"tfd:       21 events:       19 data:               15  pos:0 ino:17ee4b sdev:9\n"+
		"tfd:       20 events:       1d data:               14  pos:0 ino:17ee4a sdev:9\n")
	write("12", "socket:[99]", "pos:\t0\n")
	if n, err := pendingWrites(fdDir, infoDir); err != nil || n != 1 {
		t.Errorf("pendingWrites = %d, %v; want 1 (fd 20 of the level-triggered instance)", n, err)
	}
}

// A task told to reach its server at a rendezvous gets what a libpmix
// 4.x client needs before the server exists: the server's URI under
// every name a client looks for, as namespace ServerID and rank 0, and
// the hash store (the shared-memory store's directory is named by the
// server's pid).
func TestRendezvousEnv(t *testing.T) {
	env := RendezvousEnv("gopmi.7.0", 1, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, "vm")
	want := map[string]string{
		"PMIX_NAMESPACE":     "gopmi.7.0",
		"PMIX_SERVER_URI41":  "gopmi.7.0.1.0;tcp4://127.0.0.1:4242",
		"PMIX_SERVER_URI4":   "gopmi.7.0.1.0;tcp4://127.0.0.1:4242",
		"PMIX_SERVER_URI3":   "gopmi.7.0.1.0;tcp4://127.0.0.1:4242",
		"PMIX_SERVER_URI21":  "gopmi.7.0.1.0;tcp4://127.0.0.1:4242",
		"PMIX_SERVER_URI2":   "gopmi.7.0.1.0;tcp4://127.0.0.1:4242",
		"PMIX_GDS_MODULE":    "hash",
		"PMIX_SECURITY_MODE": "native",
		"PMIX_HOSTNAME":      "vm",
	}
	got := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["PMIX_RANK"]; ok {
		t.Error("PMIX_RANK is each task's own")
	}
}
