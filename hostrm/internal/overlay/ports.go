package overlay

// How a job's nodes find each other without a central process. A node
// with children listens at its own address (the layout's Addr, else its
// name) on a port every node of the job can compute: the first free one
// of a short list drawn from the job's secret and namespace. A child
// tries its parent's list in order; the job's private link proves, in the
// listener's role, which job and node it is, so another job's listener,
// or another node of the job on the same host, is refused at once and
// the next port tried. Nothing is published anywhere: at a thousand
// nodes the root sees only the nodes at the top of the tree.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

const (
	// PortTries is how many ports of the range a node tries to listen
	// on, and a child tries to reach its parent at.
	PortTries = 16
	// retryFirst and retryMax pace the tries of a parent that does not
	// listen yet (its gopmi starts with its tasks' first PMI call).
	retryFirst = time.Millisecond
	retryMax   = 10 * time.Millisecond
	// otherRecheck is how long a child looking for its parent leaves
	// alone a port where another listener answered.
	otherRecheck = time.Second
)

// PortRange is the ports a job's nodes draw their listening ports from,
// inclusive ("LOW-HIGH"; under Slurm, mpi.conf's GopmiTreePorts).
type PortRange struct{ Low, High int }

// DefaultPorts lies below Linux's ephemeral range (32768-60999), where
// outgoing connections take their ports.
var DefaultPorts = PortRange{20000, 32767}

// String is "LOW-HIGH" (the default range for the zero one).
func (r PortRange) String() string {
	if r.High == 0 {
		r = DefaultPorts
	}
	return strconv.Itoa(r.Low) + "-" + strconv.Itoa(r.High)
}

// ParsePorts reads "LOW-HIGH"; anything else is the default range.
func ParsePorts(s string) PortRange {
	lo, hi, ok := strings.Cut(s, "-")
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || l < 1 || h > 65535 || h-l+1 < PortTries {
		return DefaultPorts
	}
	return PortRange{l, h}
}

// Ports are the ports node index i's listener may be at, in the order
// it tries them and its children do: PortTries consecutive ones
// (wrapping in the range) from a start drawn from the secret and the
// namespace, so that a job and the jobs it spawned, which share the
// secret, start apart, and turned by the node's index, so that nodes
// sharing a host (several node daemons on one machine) each find theirs first.
func (r PortRange) Ports(secret, nspace string, i int) []int {
	if r.High == 0 {
		r = DefaultPorts
	}
	h := sha256.Sum256([]byte(secret + "\x00" + nspace))
	n := r.High - r.Low + 1
	start := int(binary.BigEndian.Uint32(h[:4]) % uint32(n))
	out := make([]int, PortTries)
	for k := range out {
		out[k] = r.Low + (start+(i+k)%PortTries)%n
	}
	return out
}

// ParentRole is the role node index i of job nspace proves at its
// listener: a child reaching another job's or another node's listener
// (same host, same secret) is refused in the handshake.
func ParentRole(nspace string, i int) string {
	h := sha256.Sum256([]byte(nspace))
	return RoleTreeParent + "/" + hex.EncodeToString(h[:6]) + "/" + strconv.Itoa(i)
}

// NodeHost is where node index i is reached: its Addr, else its name.
func NodeHost(job plugin.Job, i int) string {
	if a := job.Nodes[i].Addr; a != "" {
		return a
	}
	return job.Nodes[i].Name
}
