// Command gopmi-rm-slurm is gopmi's Slurm backend as a go-plugin process:
// started by a node's gopmi-shim, it forwards the node's backend calls to
// the step's coordinator (see package slurm). Slurm's mpi/gopmi runs the
// same backend inside the node's shim process instead (gopmi-slurm shim);
// this binary is the one gopmi-shim and the conformance kit start.
package main

import (
	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

func main() { grpcplugin.Serve(slurm.NewNode()) }
