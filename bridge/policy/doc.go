// Package policy holds the decisions gopmi's two faces make the same way:
// the PMI-1/PMI-2 face (package bridge) and the PMIx face (shim/pmix)
// each read their own wire, then call here to turn what a client asked
// into the contract's request, so that a spawn (and, as they move here,
// the other rules both faces keep) means the same whichever face served
// it, under every host.
//
// What a host decides stays the host's: where a spawned command is found
// on the machine is one rule of the SDK (plugin/execpath.Command, PATH
// and then the working directory, as mpirun and srun), which every
// gopmi host calls with the app this package built.
package policy
