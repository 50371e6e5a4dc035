package grpcplugin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

// The test binary doubles as a plugin and as a host (the os/exec helper
// process idiom), selected by these variables.
const (
	envPlugin = "GOPMI_TEST_PLUGIN" // "1": serve testBackend; "hang": never handshake; "die": exit 3 first
	envHost   = "GOPMI_TEST_HOST"   // "1": start a plugin, print its pid, wait to be killed
)

// noRaceExitSleep keeps a -race plugin from sleeping a second at exit
// (the race runtime's atexit_sleep_ms), which would make every Close wait.
const noRaceExitSleep = "GORACE=atexit_sleep_ms=0"

func TestMain(m *testing.M) {
	switch os.Getenv(envPlugin) {
	case "1":
		grpcplugin.Serve(testBackend{})
		os.Exit(0)
	case "die":
		os.Exit(3)
	case "hang":
		// Never print the handshake; the host must give up and kill us.
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv(envHost) == "1" {
		os.Exit(runHost())
	}
	goleak.VerifyTestMain(m)
}

// runHost starts a plugin, prints "PID <pid>" and waits to be killed
// (TestPdeathsig), at most a minute.
func runHost() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path: os.Args[0], Env: []string{envPlugin + "=1", envHost + "=", noRaceExitSleep}, Logger: zerolog.New(os.Stderr).Level(zerolog.InfoLevel),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 2
	}
	pid, err := pluginPid(ctx, c.Backend())
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 2
	}
	fmt.Printf("PID %d\n", pid)
	time.Sleep(time.Minute)
	return 0
}

// testBackend is the backend the helper plugin serves. Fence's ID selects
// its behaviour.
type testBackend struct {
	plugin.Unimplemented
}

// errByID maps fence IDs to the error Fence returns.
var errByID = map[string]error{
	"not-supported":  fmt.Errorf("fence x: option y: %w", plugin.ErrNotSupported),
	"not-found":      fmt.Errorf("fence x: no job z: %w", plugin.ErrNotFound),
	"already-exists": fmt.Errorf("fence x: twice: %w", plugin.ErrAlreadyExists),
	"invalid":        fmt.Errorf("fence x: no procs: %w", plugin.ErrInvalidArgument),
	"timeout":        fmt.Errorf("fence world/3: ranks 4-7 (node n1) did not arrive in 30s: %w", plugin.ErrTimeout),
	"aborted":        fmt.Errorf("fence x: job aborted: %w", plugin.ErrAborted),
	"permission":     fmt.Errorf("fence x: not yours: %w", plugin.ErrPermission),
	"unavailable":    fmt.Errorf("fence x: node n2 unreachable: %w", plugin.ErrUnavailable),
	"plain":          errors.New("fence x: something broke"),
}

func (testBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{
		Name: "testrm", Version: "1.2.3", APIVersions: []string{plugin.APIVersion1},
		Capabilities: []string{plugin.CapQuery},
	}, nil
}

func (testBackend) Configure(_ context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	return &plugin.ConfigureResponse{Attrs: []plugin.Info{
		{Key: "config", Value: string(req.Config)},
		{Key: "nspace", Value: req.Job.Nspace},
	}}, nil
}

func (testBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if err, ok := errByID[req.ID]; ok {
		return nil, err
	}
	switch req.ID {
	case "log":
		zerolog.Ctx(ctx).Warn().Str("fence", req.ID).Msg("fence log test")
	case "block":
		<-ctx.Done()
		return nil, fmt.Errorf("fence block: %w", ctx.Err())
	case "exit":
		os.Exit(3)
	}
	return &plugin.FenceResponse{Data: req.Data}, nil
}

func (testBackend) Query(context.Context, *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	return &plugin.QueryResponse{Results: []plugin.Info{{Key: "pid", Value: strconv.Itoa(os.Getpid())}}}, nil
}

func pluginPid(ctx context.Context, b plugin.Backend) (int, error) {
	resp, err := plugin.Complete(b).Query(ctx, &plugin.QueryRequest{})
	if err != nil {
		return 0, fmt.Errorf("query pid: %w", err)
	}
	return strconv.Atoi(resp.Results[0].Value)
}
