// Command gopmi-shim serves PMI to the tasks of one job on one node. A step
// daemon starts it with the bootstrap message on stdin and the task
// sockets as inherited fds; see package shim. Its backend runs as a
// go-plugin process (package shim/goplugin).
package main

import (
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/shim"
	"github.com/gopmi/gopmi/shim/goplugin"
)

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano // sub-second log times
	os.Exit(shim.Main(goplugin.Start))
}
