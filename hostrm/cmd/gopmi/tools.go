package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/gopmi/gopmi/hostrm/local/launcher"
)

// toolsBinary serves PMIx tools the node daemon's view; it links libpmix,
// which gopmi itself never does.
const toolsBinary = "gopmi-pmix-tools"

// envTools overrides where gopmi-pmix-tools is found.
const envTools = "GOPMI_PMIX_TOOLS"

// toolsCmd is `gopmi tools [-daemon PATH] TOOL [ARGS...]`: it becomes
// gopmi-pmix-tools (exec), which runs the tool against a PMIx server of
// its own whose calls go to the node daemon.
func toolsCmd(args []string, stderr io.Writer) int {
	self, _ := os.Executable()
	path, err := launcher.FindBinary(toolsBinary, "", envTools, self, "")
	if err != nil {
		fmt.Fprintf(stderr, "gopmi tools: %v (it is built where libpmix-dev is installed: make build)\n", err)
		return 1
	}
	err = syscall.Exec(path, append([]string{toolsBinary}, args...), os.Environ())
	fmt.Fprintf(stderr, "gopmi tools: %s: %v\n", path, err)
	return 1
}
