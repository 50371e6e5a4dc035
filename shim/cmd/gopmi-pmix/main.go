//go:build pmix

// Command gopmi-pmix is gopmi-shim with the PMIx face: a step daemon
// starts it, instead of gopmi-shim, for a job whose tasks speak PMIx
// (Open MPI): it takes the same bootstrap, brings the same backend up,
// and serves the node's tasks through libpmix (package shim/pmix). It is
// the one gopmi binary that links libpmix (cgo), built with the tag pmix
// where libpmix-dev is installed; a job that never speaks PMIx never
// starts it.
package main

import (
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/shim"
	"github.com/gopmi/gopmi/shim/goplugin"
	"github.com/gopmi/gopmi/shim/pmix"
)

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	os.Exit(shim.MainWith(shim.RunConfig{StartPlugin: goplugin.Start, PMIx: pmix.Face}))
}
