// Command gopmi-rm-local is the backend plugin of `gopmi run`: the shim of
// every job of the run starts it, and it forwards every backend call to the
// run's universe (see package forwarder). It learns the universe's
// address from its -universe flag, the GOPMI_UNIVERSE environment variable
// or the "universe" field of the bootstrap's backend config.
package main

import (
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

func main() { grpcplugin.Serve(forwarder.New()) }
