package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/gopmi/gopmi/plugin/execpath"
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
	path := os.Getenv(envTools)
	if path == "" {
		self, _ := os.Executable()
		var searched []string
		path, searched = execpath.Find(toolsBinary, append(execpath.Beside(self), execpath.PathDirs(os.Getenv("PATH"))...)...)
		if path == "" {
			fmt.Fprintf(stderr, "gopmi tools: cannot find %s in %s (next to gopmi, then PATH): it is built where libpmix-dev is installed (make build), or set %s\n",
				toolsBinary, strings.Join(searched, ":"), envTools)
			return 1
		}
	} else if err := execpath.Check(path); err != nil {
		fmt.Fprintf(stderr, "gopmi tools: %s=%s: %v\n", envTools, path, err)
		return 1
	}
	err := syscall.Exec(path, append([]string{toolsBinary}, args...), os.Environ())
	fmt.Fprintf(stderr, "gopmi tools: %s: %v\n", path, err)
	return 1
}
