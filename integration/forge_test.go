package integration

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/plugin"
)

// forgeEnv makes the test binary run forgeMain instead of the tests: a
// client of the node daemon at its value that registers a job under the
// name forgeJobEnv gives (root's job's, in TestDaemonViewNotForged), with
// a command and a log line made to pass for root's: a newline that starts
// a line of their own, terminal escapes that hide or erase. It exits
// without telling the daemon its run ended, so its job is left lost.
const (
	forgeEnv    = "GOPMI_ITEST_FORGE"
	forgeJobEnv = "GOPMI_ITEST_FORGE_JOB"
)

// What the forger writes, and a part of each that shows it was written
// as text: escaped, on the forger's own line.
const (
	forgedCmd     = "./app\n4242 root 1 node-1 running 1s - ./app\x1b[8m"
	forgedCmdSeen = `./app\n4242 root 1 node-1 running 1s - ./app\x1b[8m`
	forgedLog     = "gopmi run exited with status 0\n\x1b[2K\x1b[1Gall good"
	forgedLogSeen = `gopmi run exited with status 0\n\x1b[2K\x1b[1Gall good`
)

func forgeMain() int {
	sock, ns := os.Getenv(forgeEnv), os.Getenv(forgeJobEnv)
	c := daemon.Dial(sock, daemon.RunName(), zerolog.New(os.Stderr))
	host, _ := os.Hostname()
	c.Register(plugin.Job{Nspace: ns, Size: 1, Nodes: []plugin.Node{{ID: 0, Name: host, Ranks: []int32{0}}}},
		daemon.RunConfig{PID: os.Getpid(), Cmd: forgedCmd})
	// Log waits for the registration (a second at most); the test reads
	// the line back.
	c.Log(ns, []plugin.Info{{Key: "line", Value: forgedLog}})
	fmt.Println("forged", ns)
	return 0
}
