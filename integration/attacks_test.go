package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/hostrm/link"
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

// floodEnv makes the test binary run floodMain instead of the tests: as
// another user, it takes what the node daemon at its value lets one user
// take, and holds it until its stdin closes (TestDaemonFloodedByAnotherUser).
const floodEnv = "GOPMI_ITEST_FLOOD"

// floodConns is how many connections the flood opens: more than a user
// may hold (hostrm/daemon maxConnsPerUser).
const floodConns = 300

// floodMain, in order: publishes 60 KiB names until refused, asks one
// query of 10,000 keys, registers jobs of 64 KiB commands until refused
// and logs 25 MiB to one, opens floodConns connections (asking on each),
// and writes a value that never ends on the first it holds. Its client
// of the daemon holds one connection more. It prints a
// line for each ("names ...", "query ...", "conns ...", "endless ...")
// and "holding" at the end.
func floodMain() int {
	sock := os.Getenv(floodEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := daemon.Dial(sock, daemon.RunName(), zerolog.New(io.Discard))
	host, _ := os.Hostname()
	ns := fmt.Sprintf("flood.%d.0", os.Getpid())
	c.Register(plugin.Job{Nspace: ns, Size: 1, Nodes: []plugin.Node{{ID: 0, Name: host, Ranks: []int32{0}}}}, daemon.RunConfig{PID: os.Getpid(), Cmd: "flood"})
	published, value := 0, strings.Repeat("v", 60<<10)
	var err error
	for ; published < 10000; published++ {
		if err = c.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: ns}, Data: []plugin.Info{{Key: "flood-" + strconv.Itoa(published), Value: value}}}); err != nil {
			break
		}
	}
	fmt.Printf("names published=%d refused=%q\n", published, fmt.Sprint(err))
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = plugin.QueryNames
	}
	_, err = c.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: keys}}})
	fmt.Printf("query refused=%q\n", fmt.Sprint(err))

	lc, err := link.Dial(ctx, sock)
	if err != nil {
		fmt.Printf("jobs dial: %v\n", err)
		return 1
	}
	registered, refusedJob := 0, ""
	for i := range floodConns {
		cfg, _ := json.Marshal(daemon.RunConfig{Run: daemon.RunName(), PID: os.Getpid(), Cmd: strings.Repeat("c", 64<<10)})
		job := plugin.Job{Nspace: fmt.Sprintf("%s.%d", ns, i), Size: 1, Nodes: []plugin.Node{{ID: 0, Name: host, Ranks: []int32{0}}}}
		if _, err := lc.Backend().Configure(ctx, &plugin.ConfigureRequest{APIVersion: plugin.APIVersion1, Job: job, Config: cfg}); err != nil {
			refusedJob = err.Error()
			break
		}
		registered++
	}
	for range 100 {
		_ = lc.Backend().Log(ctx, &plugin.LogRequest{Proc: plugin.Proc{Nspace: ns + ".0"}, Data: []plugin.Info{{Key: "line", Value: strings.Repeat("l", 256<<10)}}})
	}
	lc.Close()
	fmt.Printf("jobs registered=%d refused=%q\n", registered, refusedJob)

	var raw net.Conn
	held, refused, why := 0, 0, ""
	var conns []*link.Conn
	for i := range floodConns {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Printf("conns dial %d: %v\n", i, err)
			break
		}
		if raw == nil {
			raw, held = nc, 1
			continue
		}
		lc := link.NewConn(nc)
		conns = append(conns, lc)
		if _, err := lc.Backend().GetInfo(ctx); err != nil {
			// The first refusal says why; past a few at once the
			// daemon closes without a word.
			if refused++; why == "" {
				why = err.Error()
			}
		} else {
			held++
		}
	}
	fmt.Printf("conns held=%d refused=%d why=%q\n", held, refused, why)

	written := 0
	_, _ = raw.Write([]byte(`{"id":1,"call":"query","req":{"queries":[{"keys":["`))
	chunk := strings.Repeat("x", 1<<20)
	for written < 64<<20 {
		_ = raw.SetWriteDeadline(time.Now().Add(10 * time.Second))
		n, err := raw.Write([]byte(chunk))
		written += n
		if err != nil {
			break
		}
	}
	fmt.Printf("endless written=%dMiB closed=%v\n", written>>20, written < 64<<20)
	fmt.Println("holding")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, lc := range conns {
		lc.Close()
	}
	raw.Close()
	c.Close()
	return 0
}
