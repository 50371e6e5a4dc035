package shim

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The test binary doubles as three helper programs, chosen by its first
// argument so that a child's environment cannot pick the wrong one:
//
//	gopmi-test-shim     gopmi-shim itself (os.Exit(Main()))
//	gopmi-test-backend  a backend plugin serving fakeBackend
//	gopmi-test-fds      prints what inheritedFiles returns, as JSON
const (
	roleShim    = "gopmi-test-shim"
	roleBackend = "gopmi-test-backend"
	roleFDs     = "gopmi-test-fds"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case roleShim:
			os.Exit(Main(pluginStart))
		case roleBackend:
			serveFakeBackend()
			os.Exit(0)
		case roleFDs:
			os.Exit(printInheritedFiles())
		}
	}
	goleak.VerifyTestMain(m)
}

// fdReport is what the gopmi-test-fds helper prints.
type fdReport struct {
	Err     string
	Names   []string
	Cloexec []bool
	// Env holds LISTEN_* as left after the call ("" when unset).
	Env map[string]string
}

func printInheritedFiles() int {
	files, err := inheritedFiles()
	r := fdReport{Env: map[string]string{}}
	if err != nil {
		r.Err = err.Error()
	}
	for _, f := range files {
		r.Names = append(r.Names, f.Name())
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFD, 0)
		r.Cloexec = append(r.Cloexec, errno == 0 && flags&syscall.FD_CLOEXEC != 0)
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		r.Env[k] = os.Getenv(k)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperEnv is the test's environment without anything that would make
// a child take on a role or fds it should not, plus extra.
func helperEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "LISTEN_"), strings.HasPrefix(kv, "NOTIFY_SOCKET="),
			strings.HasPrefix(kv, "GOPMI_"), strings.HasPrefix(kv, "GORACE="):
			continue
		}
		env = append(env, kv)
	}
	env = append(env, raceEnv())
	return append(env, extra...)
}

// raceEnv stops a -race helper from sleeping a second at exit (the race
// runtime's atexit_sleep_ms), which would make every backend Close in
// these tests miss go-plugin's graceful window.
func raceEnv() string {
	return strings.TrimSpace("GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0")
}
