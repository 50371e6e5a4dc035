// Package seclink is the one authenticated, private connection layer
// under every TCP hop between gopmi's own processes: a node daemon's
// link to its hub (and the relayed calls on it), a Slurm node's link to
// its step's coordinator, and the fence tree's links between nodes. A
// vendor whose backend reaches its resource manager's daemon over TCP can
// use it the same way. Whatever runs on top (gRPC through
// plugin/grpcplugin/direct's WithDialer, or the local RM's JSON link)
// sees a plain net.Conn.
//
// Both ends hold one shared key (a node daemon's key file, a Slurm step's
// secret) and each has a role. A connection is TLS 1.3 with a certificate
// each process makes for itself when it first needs one: nothing
// verifies it, there is no PKI. Inside the TLS session, each end proves
// that it holds the key with an HMAC-SHA256 over
//
//   - both ends' fresh nonces (a proof from another session is stale),
//   - both ends' roles and which side made it (a node's proof is not a
//     coordinator's, and an end's own proof reflected back to it fails),
//   - the dialling end's hello (what it says of itself: for the hub, who
//     the relayed caller is), which the proof seals,
//   - and the TLS session's exported keying material (channel binding,
//     the idea of RFC 9266): a relay in the middle holds two TLS sessions
//     whose material differs, so the proofs it passes along fail.
//
// The accepting end proves itself too, after it checked the dialler: a
// Slurm node talks to no coordinator or tree parent that cannot prove the
// step's secret, and the key never crosses the wire. What follows the
// handshake is private and cannot be altered.
//
// The handshake, in the TLS session, one line each:
//
//	accepting end: gopmi-seclink/1 <its role> <nonce>
//	dialling end:  <its role> <nonce> <proof> <hello>
//	accepting end: ok <proof>   or   refused <why>
//
// Every step has a deadline, lines and hellos are bounded (MaxHello), and
// a Listener runs each handshake on a goroutine of its own, so a peer
// that connects and stays silent holds up nobody and is dropped at its
// deadline. A refusal is logged at the accepting end and returned, with
// the reason, at the dialling end; errors wrap ErrRefused (itself
// plugin.ErrPermission), plugin.ErrTimeout or plugin.ErrUnavailable.
package seclink
