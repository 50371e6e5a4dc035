// Package slurm is gopmi's Slurm backend (Node), built on the public SDK
// and the host-neutral fence tree (hostrm/internal/fencetree, itself
// SDK-only), and the link to the step's coordinator (package coord), which
// it talks to. contrib/slurm's mpi/gopmi plugin makes Slurm run them:
// `srun --mpi=gopmi`.
//
// # Processes
//
//	srun ── mpi/gopmi (srun side) ──starts── gopmi-slurm coordinate
//	                                   (coord.Coordinator: the step's state)
//	            ▲ TCP, plugin/seclink keyed with the step secret (AuthListener / AuthDialer)
//	            │
//	slurmstepd on each node ── mpi/gopmi ──starts── gopmi-slurm shim
//	    (the shim's serving loop with Node, a plugin.Relay to the
//	    coordinator, in the same process)
//
// Under Slurm the node's backend runs inside the node's shim process
// (shim.RunConfig.Backend): one Go process per node per step instead of a
// shim and a go-plugin backend, which on a loaded node took about a third
// of a short step's launch (see docs/perf/slurm.md). gopmi-slurm
// does not link go-plugin. The same Node is also gopmi-rm-slurm, the
// go-plugin backend that gopmi-shim starts and the conformance kit runs
// one process per node, as every gopmi backend (package plugin, "Process
// model").
//
// Every call of a node goes up the fence tree (tree.go): a node joins its
// part of a fence with its children's and sends one call up, and passes
// its children's other calls (names, spawn, abort, Configure) on up its
// own link, so that the coordinator (package coord), which holds the
// fences across the tree's top, the name service, spawn, connects and
// aborts, hears only the top nodes. In a job on several nodes each node
// keeps its own fence data and serves the direct-modex reads of it
// (modex.go); nodes find each other without the coordinator (package
// overlay, hostrm/internal/overlay).
// A collecting fence of a whole job on at most width nodes (a flat tree)
// is exchanged: each node gives its part straight to the others while
// the fence goes up as a barrier, without data (exchange.go). A node's
// process ends with its ranks (the stepd kills it) while the job may
// still read its data: at its last finalize its host calls Depart, and
// the node hands its parts to the coordinator, which answers the reads
// of its ranks from then on; a reader that finds nothing listening at
// the node (or its link broken) asks the coordinator (modex.go).
//
// # The node's log
//
// A node logs what no caller hears of: a child that has not sent its
// part by half a fence's time-out (named with its ranks), a child lost in
// the middle of a fence, a failed subtree server (naming every rank below
// it), a part that cannot reach its parent, a connection that did not
// prove the step secret. Node takes its logger from WithLogger, else
// from Configure's context: gopmi-rm-slurm logs hclog-shaped JSON on its
// stderr, which the shim relays with levels; gopmi-slurm shim hands the
// node its own logger. Under Slurm the shim's stderr is a pipe to its
// slurmstepd, which copies each line into the node's slurmd log
// (SlurmdLogFile), prefixed "gopmi-slurm shim:".
//
// What becomes of each fence part is decided by package fencetree
// (hostrm/internal/fencetree), which knows no resource manager: the
// tree's shape and the gather, a pure type whose tests are tables of
// events and effects. The node's tree carries its decisions out on a
// clock it is given, and runs every goroutine, timer and bounded wait on
// a crew that Close ends and waits for. Each node hears its job's abort
// and its clients' events through one AwaitEvents up its link, and
// answers its children's and its own host's from what it heard
// (news.go).
//
// # The link
//
// The coordinator listens on TCP (every interface; the stepds reach it at
// srun's address, SLURM_SRUN_COMM_HOST). Every link of the step, a top
// node's to the coordinator, a tree child's to its parent node and a
// reader's to the node it reads, is
// gopmi's authenticated link (package plugin/seclink) keyed with the step
// secret: TLS 1.3, inside which both ends prove the secret, each in its
// role (coordinator and node, tree-parent and tree-child), bound to the
// TLS session. A node talks to no coordinator or parent that cannot
// prove the secret, what crosses the network (fence data, names) is
// encrypted, and a relay in the middle fails. A peer that cannot prove
// the secret is closed and logged, and a silent one is dropped after 2 s
// without holding up others. Then the link carries the gopmi.rm.v1 gRPC
// service (package direct); each node keeps its link up (a node that
// moved its calls to a parent that came up late keeps the link it left
// open for the calls still on it), and one to each node it reads, for
// the step. The secret reaches the
// node processes in their environment (GOPMI_SLURM_SECRET), never on a
// command line, and the tasks never see it.
//
// See package coord for the coordinator's life, spawn and abort.
package slurm
