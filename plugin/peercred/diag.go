package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
)

// The kernel's socket diagnostics (NETLINK_SOCK_DIAG, inet_diag) answer
// for one TCP socket of this network namespace by its 4-tuple, with its
// state, its owner's uid and its inode, in microseconds. /proc/net/tcp
// lists every socket, which costs milliseconds on a busy host, and is
// read in pages: a line can be missed while sockets come and go, and a
// peer missed passes for one that is not on this host.

// ErrNoSocket: no TCP socket of this network namespace has the 4-tuple.
var ErrNoSocket = errors.New("no such TCP socket on this host")

// Socket is one TCP socket as the kernel describes it.
type Socket struct {
	State string // as TCPSocket.State: TCPEstablished, TCPListen, ...
	UID   int
	Inode uint64 // 0: the socket's owner closed it (TIME_WAIT)
}

// Live reports whether the socket is open in some process.
func (s Socket) Live() bool { return s.Inode != 0 }

// LookupTCP describes the TCP socket of this network namespace whose own
// end is local and whose peer's is remote (ErrNoSocket when there is
// none).
func LookupTCP(local, remote *net.TCPAddr) (Socket, error) {
	family, src, dst, err := diagAddrs(local, remote)
	if err != nil {
		return Socket{}, err
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return Socket{}, os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	seq := diagSeq.Add(1)
	req := make([]byte, syscall.SizeofNlMsghdr+sizeofDiagReq)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], seq)
	r := req[syscall.SizeofNlMsghdr:]
	r[0], r[1] = family, syscall.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], ^uint32(0)) // every state
	putSockID(r[8:], uint16(local.Port), uint16(remote.Port), src, dst)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return Socket{}, os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return Socket{}, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return Socket{}, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case syscall.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return Socket{}, errors.New("sock_diag: short error")
				}
				errno := -int32(binary.NativeEndian.Uint32(m.Data))
				if errno == 0 {
					continue // an acknowledgement
				}
				if syscall.Errno(errno) == syscall.ENOENT {
					return Socket{}, ErrNoSocket
				}
				return Socket{}, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
			case sockDiagByFamily:
				if len(m.Data) < sizeofDiagMsg {
					return Socket{}, errors.New("sock_diag: short answer")
				}
				d := m.Data
				// The kernel answers a 4-tuple with no connection of
				// its own with the listener of its port: only the
				// socket asked for will do.
				id := d[4:52]
				if binary.BigEndian.Uint16(id[0:]) != uint16(local.Port) || binary.BigEndian.Uint16(id[2:]) != uint16(remote.Port) ||
					[16]byte(id[4:20]) != src || [16]byte(id[20:36]) != dst {
					return Socket{}, ErrNoSocket
				}
				return Socket{
					State: fmt.Sprintf("%02X", d[1]),
					UID:   int(binary.NativeEndian.Uint32(d[64:])),
					Inode: uint64(binary.NativeEndian.Uint32(d[68:])),
				}, nil
			}
		}
	}
}

// The kernel's layouts (linux/sock_diag.h, linux/inet_diag.h).
const (
	netlinkSockDiag  = 4 // NETLINK_SOCK_DIAG, once NETLINK_INET_DIAG
	sockDiagByFamily = 20
	sizeofDiagReq    = 56 // inet_diag_req_v2
	sizeofDiagMsg    = 72 // inet_diag_msg
)

var diagSeq atomic.Uint32

// diagAddrs are local's and remote's family and addresses as inet_diag
// wants them: four 32-bit words each, in network order.
func diagAddrs(local, remote *net.TCPAddr) (family byte, src, dst [16]byte, err error) {
	l4, r4 := local.IP.To4(), remote.IP.To4()
	switch {
	case l4 != nil && r4 != nil:
		copy(src[:], l4)
		copy(dst[:], r4)
		return syscall.AF_INET, src, dst, nil
	case l4 == nil && r4 == nil && len(local.IP) == net.IPv6len && len(remote.IP) == net.IPv6len:
		copy(src[:], local.IP)
		copy(dst[:], remote.IP)
		return syscall.AF_INET6, src, dst, nil
	}
	return 0, src, dst, fmt.Errorf("sock_diag: %s and %s are not of one address family", local, remote)
}

// putSockID writes an inet_diag_sockid: ports in network order, the
// addresses, no interface, no cookie.
func putSockID(b []byte, sport, dport uint16, src, dst [16]byte) {
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	copy(b[4:20], src[:])
	copy(b[20:36], dst[:])
	binary.NativeEndian.PutUint32(b[36:], 0)          // interface
	binary.NativeEndian.PutUint32(b[40:], ^uint32(0)) // no cookie
	binary.NativeEndian.PutUint32(b[44:], ^uint32(0))
}
