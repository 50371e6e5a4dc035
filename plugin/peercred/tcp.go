package peercred

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A TCP connection has no SO_PEERCRED, but on one host the kernel lists
// every TCP socket of the network namespace, with its owner's uid and its
// inode, in /proc/net/tcp and tcp6: the peer of a connection is the
// socket whose local address is the connection's remote one.

// TCPSocket is one socket of /proc/net/tcp or tcp6.
type TCPSocket struct {
	Local, Remote net.TCPAddr
	// State is the kernel's, in hex: TCPEstablished, TCPListen, ...
	State string
	// UID owns the socket. A socket that closed (TIME_WAIT) has UID 0
	// and Inode 0: it must not pass for root's.
	UID   int
	Inode uint64
}

// States of TCPSocket.
const (
	TCPEstablished = "01"
	TCPListen      = "0A"
)

// Live reports whether the socket is open in some process: not a
// closed connection's remains.
func (s TCPSocket) Live() bool { return s.Inode != 0 }

// Joins reports whether the socket's own end is local and its peer's is
// remote.
func (s TCPSocket) Joins(local, remote net.TCPAddr) bool {
	return s.Local.Port == local.Port && s.Local.IP.Equal(local.IP) && s.Remote.Port == remote.Port && s.Remote.IP.Equal(remote.IP)
}

// ReadTCP reads the sockets of a /proc/net/tcp or tcp6 file (path). With
// port > 0 it reads only those whose local or remote port is port: their
// lines are picked before they are parsed, since a node of many tasks has
// many sockets.
func ReadTCP(path string, port int) ([]TCPSocket, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var want []byte
	if port > 0 {
		want = []byte(fmt.Sprintf(":%04X ", port))
	}
	var out []TCPSocket
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		if want != nil && !bytes.Contains(sc.Bytes(), want) {
			continue
		}
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		local, ok1 := procAddr(fs[1])
		remote, ok2 := procAddr(fs[2])
		uid, err1 := strconv.Atoi(fs[7])
		inode, err2 := strconv.ParseUint(fs[9], 10, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			continue
		}
		out = append(out, TCPSocket{Local: local, Remote: remote, State: fs[3], UID: uid, Inode: inode})
	}
	return out, sc.Err()
}

// procAddr parses a /proc/net/tcp address ("0100007F:1F90": the IP as
// 32-bit words in host byte order, the port in hex).
func procAddr(field string) (net.TCPAddr, bool) {
	ipHex, portHex, ok := strings.Cut(field, ":")
	if !ok {
		return net.TCPAddr{}, false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return net.TCPAddr{}, false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || len(raw) == 0 || len(raw)%4 != 0 {
		return net.TCPAddr{}, false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	return net.TCPAddr{IP: ip, Port: int(port)}, true
}

// SocketInodes maps the inodes of the sockets among the descriptors in
// fdDir (/proc/self/fd: this process's) to the descriptors.
func SocketInodes(fdDir string) (map[uint64]int, error) {
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	out := map[uint64]int{}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		l, err := os.Readlink(fdDir + "/" + e.Name())
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out[n] = fd
			}
		}
	}
	return out, nil
}

// OwnerPID finds a process holding the socket inode, and its command
// name, among those whose descriptors procDir (/proc) lets this process
// read; 0 when none. It reads every process's fd table: for messages, not
// for every connection.
func OwnerPID(procDir string, inode uint64) (int, string) {
	dirs, _ := os.ReadDir(procDir)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		socks, err := SocketInodes(filepath.Join(procDir, d.Name(), "fd"))
		if _, ok := socks[inode]; err == nil && ok {
			comm, _ := os.ReadFile(filepath.Join(procDir, d.Name(), "comm"))
			return pid, string(bytes.TrimSpace(comm))
		}
	}
	return 0, ""
}
