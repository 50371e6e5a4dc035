//go:build pmix

// Command gopmi-pmix is gopmi-shim with the PMIx face: a step daemon
// starts it, instead of gopmi-shim, for a job whose tasks speak PMIx
// (Open MPI): it takes the same bootstrap, brings the same backend up,
// and serves the node's tasks through libpmix (package shim/pmix). It is
// the one gopmi binary that links libpmix (cgo), built with the tag pmix
// where libpmix-dev is installed; a job that never speaks PMIx never
// starts it.
//
// gopmi run's own backend ("local", which forwards to the run's universe)
// it serves in its own process, as gopmi-slurm serves Slurm's: one
// process and one handshake fewer per node of a PMIx job. Any other
// backend it starts as gopmi-rm-<name> through go-plugin, as gopmi-shim
// does.
package main

import (
	"context"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim"
	"github.com/gopmi/gopmi/shim/goplugin"
	"github.com/gopmi/gopmi/shim/pmix"
	"github.com/gopmi/gopmi/shim/serve"
)

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	os.Exit(shim.MainWith(shim.RunConfig{
		StartPlugin: goplugin.Start,
		PMIx:        pmix.Face,
		Backend: func(_ context.Context, spec serve.BackendSpec) (plugin.Full, error) {
			return forwarder.FromArgs(spec.Args), nil
		},
		BackendNames: []string{"local"},
	}))
}
