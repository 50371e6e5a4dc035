// Package slurm is gopmi's Slurm backend (Node) and the step coordinator
// it talks to. contrib/slurm's mpi/gopmi plugin makes Slurm run them:
// `srun --mpi=gopmi`.
//
// # Processes
//
//	srun ── mpi/gopmi (srun side) ──starts── gopmi-slurm coordinate
//	                                          (Coordinator: the step's state)
//	            ▲ TCP, step secret (AuthListener / AuthDialer)
//	            │
//	slurmstepd on each node ── mpi/gopmi ──starts── gopmi-slurm shim
//	    (the shim's serving loop with Node, a plugin.Relay to the
//	    coordinator, in the same process)
//
// Under Slurm the node's backend runs inside the node's shim process
// (shim.RunConfig.Backend): one Go process per node per step instead of a
// shim and a go-plugin backend, which on a loaded node took about a third
// of a short step's launch (see the README's Slurm table). gopmi-slurm
// does not link go-plugin. The same Node is also gopmi-rm-slurm, the
// go-plugin backend that gopmi-shim starts and the conformance kit runs
// one process per node, as every gopmi backend (package plugin, "Process
// model").
//
// The coordinator runs beside srun for the step's life: srun's plugin
// starts it, reads "port <n>" from it, puts the port, the step's layout and
// a fresh secret in the step's environment, and closes its standard input
// when the step ends; it exits with the status srun should report (an
// MPI_Abort's errorcode; 1 after a task failed). A step spawned from a
// gopmi step joins its parent's coordinator, so a step and everything it
// spawned share one name space.
//
// Collecting fences go up the fence tree (tree.go): a
// node joins its part with its children's and sends one call up. Every
// other call goes to the coordinator, which holds the fences across the
// tree's top, every node's data for direct modex, the name service,
// connects and aborts in one local.Universe (package hostrm/local, which
// imports only the SDK).
//
// # The link
//
// The coordinator listens on TCP (every interface; the stepds reach it at
// srun's address, SLURM_SRUN_COMM_HOST). A connection must first answer
// the coordinator's challenge with HMAC-SHA256(secret, nonce); one that
// cannot is closed and logged, and a silent one is dropped after 5 s
// without holding up others. Then it carries the gopmi.rm.v1 gRPC service
// (package direct). The secret reaches the node processes in their
// environment (GOPMI_SLURM_SECRET), never on a command line, and the tasks
// never see it.
//
// # Spawn
//
// A spawn runs `srun --mpi=gopmi --overlap -n N cmd` in the job's
// allocation with the coordinator's address and secret, the new job's
// namespace, its parent and the preput in the environment (EnvNspace,
// EnvParent, EnvPreput): its srun joins this coordinator instead of
// starting one, and its stepds build their bootstraps from them. The
// spawn returns once every node of the new step configured its backend;
// srun's own error line is the reason when it fails first. The universe
// takes the new step's layout from its first Configure (LayoutByRM):
// Slurm places the ranks. When srun's stdin closes, the coordinator
// serves the spawned steps to their end before it exits.
//
// # Not yet
//
// A spawn of several commands at once (MPMD) is refused by name. In modex
// mode a barrier's parts reach the coordinator one per node, since it
// serves direct modex from each node's own data.
package slurm
