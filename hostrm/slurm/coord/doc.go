// Package coord is the step coordinator of gopmi under Slurm: the
// step-wide side that every node's backend (package slurm's Node) talks
// to, through the fence tree, over authenticated TCP links: it holds
// only the top nodes' links. Its state (fences across the fence tree's
// top, the name service, connects, aborts; the data of jobs on one node)
// lives in one local.Universe, the same that `gopmi run` hosts (package
// hostrm/local, which imports only the SDK). A job on several nodes keeps
// its data on its nodes: the coordinator reads it from them for readers
// outside the job (slurm.JobReader).
//
// The coordinator runs beside srun for the step's life, as `gopmi-slurm
// coordinate`: srun's mpi/gopmi plugin makes its listening socket, starts
// it, puts the port, the step's layout and a fresh secret in the step's
// environment, and closes its standard input when the step ends; it exits
// with the status srun should report (an MPI_Abort's errorcode; 1 after a
// task failed or a fence timed out, which it prints on srun's stderr). A
// step spawned from a gopmi step joins its parent's coordinator, so a step
// and everything it spawned share one name space.
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
// A spawn of several commands at once (MPI_Comm_spawn_multiple) is one
// step run with srun --multi-prog, one configuration line per command
// (srunArgs), so its stepds give each child its command's place as
// appnum; a working directory or environment that differs between the
// commands is refused by name.
package coord
