package pmix

import (
	"fmt"
	"net"
	"strconv"
)

// The rendezvous a step daemon owns (gopmi run's launcher, mpi/gopmi's
// stepd): a TCP listener it makes on 127.0.0.1 before the node's tasks
// start, whose address every task gets in the PMIx environment
// (RendezvousEnv), whatever program it runs. A task that is a PMIx client
// (Open MPI, however it was started: python3 with mpi4py, a shell script)
// connects; the kernel queues the connection, and the task waits for its
// handshake's answer while the daemon, seeing the listener readable,
// starts the node's PMIx server on it (bootstrap pmix_rendezvous_fd;
// Options.Rendezvous). A job whose tasks never speak PMIx (MPICH) costs
// one listening socket and a few variables: libpmix is never loaded.
//
// Such tasks start before their server exists, so their environment is
// not PMIx_server_setup_fork's but this one, which a libpmix 4.x client
// reads the same way: the job's namespace and the task's rank, the
// server's URI under the names of the versions it speaks (its namespace
// ServerID and rank 0: what the server takes as its own), and the hash
// store: the shared-memory store's directory is named by the server's
// pid, not known before it starts, and a client without its variables
// reads its peers' data through the server.

// ServerID is the namespace a node's PMIx server takes as its own (rank
// 0): "<job>.<node id>".
func ServerID(nspace string, node int32) string {
	return nspace + "." + strconv.Itoa(int(node))
}

// serverURIVars are the variables a libpmix client looks for its
// server's URI in, newest first (4.1, 4, 3, 2.1, 2).
var serverURIVars = []string{"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"}

// RendezvousEnv is the PMIx environment of a task of job nspace on node
// whose server will listen at addr (the rendezvous, a 127.0.0.1 TCP
// address), but PMIX_RANK, which is each task's own.
func RendezvousEnv(nspace string, node int32, addr *net.TCPAddr, hostname string) []string {
	uri := fmt.Sprintf("%s.0;tcp4://%s", ServerID(nspace, node), addr.String())
	env := []string{"PMIX_NAMESPACE=" + nspace}
	for _, v := range serverURIVars {
		env = append(env, v+"="+uri)
	}
	return append(env,
		"PMIX_SECURITY_MODE=native",
		"PMIX_GDS_MODULE=hash",
		"PMIX_BFROP_BUFFER_TYPE=PMIX_BFROP_BUFFER_NON_DESC",
		"PMIX_HOSTNAME="+hostname,
	)
}
