package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/overlay"
)

// The step's links, a top node's to the coordinator, a tree child's to
// its parent node and a reader's to the node whose data it reads, are
// TCP through gopmi's authenticated link layer (plugin/seclink), keyed
// with the step's secret, which only the step's processes get (srun's
// plugin makes it and hands it to the stepds in the step's environment):
// TLS 1.3, inside which both ends prove the secret, each in its role,
// bound to the TLS session. A node talks to no coordinator or parent
// that cannot prove it, fence data and names cross the network
// encrypted, and a relay in the middle fails. The secret
// never crosses the wire.

// Roles in the step's links: a proof made in one cannot pass for another.
const (
	// RoleCoordinator is the coordinator's end of a node's link, and
	// RoleNode the node's.
	RoleCoordinator = "coordinator"
	RoleNode        = "node"
	// The nodes' roles between each other are the overlay's
	// (overlay.RoleTreeParent, overlay.RoleTreeChild).
)

// NewSecret returns a fresh step secret, hex.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("step secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// AuthListener is the coordinator's listener: Accept returns only links
// whose peer proved secret as a node of the step; the others are closed
// and logged on log. Close waits for the handshakes it ran.
func AuthListener(l net.Listener, secret string, log zerolog.Logger) (net.Listener, error) {
	return overlay.Listen(l, secret, RoleCoordinator, RoleNode, log)
}

// AuthDialer returns a dial function for direct.WithDialer that links a
// node to the coordinator at addr, which must prove secret. One Dialer
// keeps its TLS sessions: a link made again resumes one.
func AuthDialer(secret string) func(ctx context.Context, addr string) (net.Conn, error) {
	return overlay.Dialer(secret, RoleNode, RoleCoordinator)
}
