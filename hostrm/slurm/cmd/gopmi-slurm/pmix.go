//go:build pmix

package main

import "github.com/gopmi/gopmi/shim/pmix"

// Built with the tag pmix, this is gopmi-slurm-pmix: the node's shim for
// a step whose tasks speak PMIx (Open MPI), which mpi/gopmi starts
// instead of gopmi-slurm when the step needs it. It links libpmix; a
// step of PMI-1 and PMI-2 tasks never loads it.
var pmixFace = pmix.Face
