package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gopmi/gopmi/hostrm/local/launcher"
)

// singinitTimeout bounds reaching a singleton and its first answer.
const singinitTimeout = 10 * time.Second

// mpiexecCmd is gopmi as MPICH's mpiexec. A singleton MPICH program (one
// started from a shell, with no PMI_FD or PMI_PORT) that needs a process
// manager (MPICH 4.0's ch4 asks in MPI_Init) listens on a TCP port and
// runs "mpiexec -pmi_args PORT IFACE KEY PID" from PATH: this connects to
// that port, sends "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no
// authtype=none", and serves the program as rank 0 of a job of one, with
// spawn, the name service and the node daemon as under gopmi run, until
// its PMI connection closes and what it spawned has ended. Any other
// arguments run a job as gopmi run does.
func mpiexecCmd(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	level := "warn"
	if len(args) > 0 && args[0] == "-v" {
		level, args = "debug", args[1:]
	}
	if len(args) == 0 || args[0] != "-pmi_args" {
		return runCmd(args, stdin, stdout, stderr, nil)
	}
	if len(args) < 5 {
		fmt.Fprintf(stderr, "gopmi mpiexec: -pmi_args wants PORT IFACE KEY PID, got %q\n", args[1:])
		return 2
	}
	port, err1 := strconv.Atoi(args[1])
	pid, err2 := strconv.Atoi(args[4])
	if err1 != nil || err2 != nil || port <= 0 || port > 65535 || pid <= 0 {
		fmt.Fprintf(stderr, "gopmi mpiexec: -pmi_args %s %s %s %s: want a port and a pid\n", args[1], args[2], args[3], args[4])
		return 2
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		fmt.Fprintf(stderr, "gopmi mpiexec: singleton %d: %v\n", pid, err)
		return 1
	}
	// The singleton listens on every interface; it is on this host.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), singinitTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi mpiexec: cannot reach singleton %d (%s) on port %d: %v\n", pid, exe, port, err)
		return 1
	}
	// MPICH's singleton first reads the process manager's singinit (it
	// checks authtype=none); its answer is served as the job's first
	// request. Stdio stays the singleton's own (stdio=no).
	_ = conn.SetWriteDeadline(time.Now().Add(singinitTimeout))
	if _, err := io.WriteString(conn, "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none\n"); err != nil {
		conn.Close()
		fmt.Fprintf(stderr, "gopmi mpiexec: singleton %d: %v\n", pid, err)
		return 1
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return runCmd([]string{"-log-level", level, "-n", "1", exe}, stdin, stdout, stderr, func(cfg *launcher.Config) {
		cfg.Singleton = &launcher.Singleton{Conn: conn, Pid: pid}
	})
}
