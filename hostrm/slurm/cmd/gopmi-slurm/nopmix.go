//go:build !pmix

package main

import "github.com/gopmi/gopmi/shim"

// pmixFace is nil in gopmi-slurm, which serves PMI-1 and PMI-2 and links
// no libpmix: a PMIx step's bootstrap is refused, saying which binary
// serves it (gopmi-slurm-pmix).
var pmixFace shim.PMIxFace
