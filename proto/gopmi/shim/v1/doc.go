// Package shimv1 is the generated Go code of gopmi.shim.v1
// (bootstrap.proto): the versioned bootstrap message a step daemon (the
// Slurm plugin, `gopmi run -ppn`, a vendor's agent) writes to the shim's
// standard input, as protojson so that a C step daemon can write it;
// example.json is one.
package shimv1
