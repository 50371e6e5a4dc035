package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
	"github.com/gopmi/gopmi/shim/serve"
)

// FenceModes lists the names Config.FenceMode accepts, for a usage
// message: "collect, lazy or modex".
func FenceModes() string { return serve.FenceModeNames() }

// Config is one `gopmi run`.
type Config struct {
	// Apps are the executables (MPMD: several), each with Procs tasks;
	// Path is what the user typed, resolved against Wdir and PATH.
	Apps []local.AppSpec
	// PPN splits the ranks into simulated nodes of PPN ranks (block
	// distribution), each served by a gopmi-shim process, as under a
	// resource manager; 0 puts every rank on one node, served by gopmi
	// run itself.
	PPN int
	// Env holds KEY=VALUE entries added to every task's environment.
	Env []string
	// PMIPort gives tasks PMI_PORT and PMI_ID instead of PMI_FD.
	PMIPort bool
	// PMIx serves the tasks as PMIx clients (Open MPI) through gopmi-pmix,
	// the shim with the PMIx face, on every node (also one): each node's
	// server registers the job with libpmix and says what the tasks'
	// environment needs before they start.
	PMIx bool
	// PMIxAuto turns PMIx on when a program of the run is built with Open
	// MPI (it links libmpi.so.40) and gopmi-pmix is there: the user need
	// not know that Open MPI speaks PMIx. A program whose MPI is loaded at
	// run time (mpi4py, a script) is not seen; it fails with a line that
	// says to use -pmix.
	PMIxAuto bool
	// PMIxPath is gopmi-pmix; default $GOPMI_PMIX_SHIM, next to gopmi,
	// then PATH.
	PMIxPath string
	// Singleton, when set, is the run's first job: one rank already
	// running, which asked for a process manager (see Singleton). Apps
	// then holds its one program, which is not started.
	Singleton *Singleton
	// UniverseSize is served as universeSize; default the job's size.
	UniverseSize int32
	// FenceMode names the fence mode: collect (the default), lazy or
	// modex (serve.ParseFenceMode).
	FenceMode string
	// FenceTimeout bounds every fence; default DefaultFenceTimeout.
	FenceTimeout time.Duration
	// MaxVal is the PMI value length advertised; default 1024.
	MaxVal int
	// MaxKVS bounds the bytes of KVS records a node holds for a job; 0:
	// the shim's default (512 MiB).
	MaxKVS int64
	// LogLevel is the PMI servers' log level (trace ... error); default
	// warn.
	LogLevel string
	// Wdir is the tasks' working directory; default the current one.
	Wdir string

	// ShimPath is gopmi-shim, needed only with PPN; default $GOPMI_SHIM,
	// next to this executable, then PATH.
	ShimPath string
	// RMPath is gopmi-rm-local, needed only with PPN; default
	// $GOPMI_RM_LOCAL, next to this executable, next to the shim, then
	// PATH.
	RMPath string

	// StartTimeout bounds a job's start (shims ready); default 30s.
	StartTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; default 2s.
	KillGrace time.Duration
	// ShimGrace is how long a job's servers may take to end on their own
	// after its last task exited; default 3s.
	ShimGrace time.Duration

	// Stdin goes to rank 0 of the first job; nil means /dev/null.
	Stdin *os.File
	// Stdout and Stderr are the tasks'; default os.Stdout, os.Stderr.
	// Stderr also receives gopmi run's own messages and the servers' logs.
	// Each task's output reaches them a whole line at a time.
	Stdout, Stderr io.Writer
	// Label begins each line of a task's output with "[rank] " (-l).
	Label bool
	// Hostname names this machine; default os.Hostname().
	Hostname string
	// Version is reported by the backend's GetInfo.
	Version string
	// Logger is for gopmi run's own debug logs.
	Logger zerolog.Logger

	// Beyond, when set, is the node daemon's client: names wider than one
	// job, and jobs of other runs (local.UniverseOptions.Beyond). The run
	// then serves its universe for the daemon to relay other runs' reads.
	Beyond local.Beyond
	// OnJob, when set, is told of each job before its tasks start (pids
	// nil) and once they all started (their pids by rank), with the
	// address the run serves its universe on when it does (with Names):
	// the node daemon registers it, and relays other runs' connects and
	// reads of its keys there.
	OnJob func(job plugin.Job, cmd string, pids []int, universe string)
	// OnEnd, when set, is told the run's exit status and the lines it
	// printed about how it ended (the node daemon keeps them for gopmi
	// log).
	OnEnd func(status int, lines []string)
}

// SettingError is a setting of Config that gopmi run cannot serve a job
// with, named by the gopmi run flag that sets it.
type SettingError struct {
	Setting string // "-max-val"
	Msg     string // "10 is below the minimum 64"
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Msg }

// settingFlags name a bootstrap field by the flag that sets it.
var settingFlags = map[string]string{
	"limits.val_max":    "-max-val",
	"limits.kvs_max":    "-max-kvs",
	"timeouts.fence":    "-timeout",
	"timeouts.shutdown": "the kill grace period",
	"job.universe_size": "-usize",
	"log_level":         "-log-level",
	"fence_mode":        "-fence-mode",
}

// settingError turns a bootstrap's refusal into the setting's.
func settingError(err error) error {
	var fe *serve.FieldError
	if errors.As(err, &fe) {
		if name, ok := settingFlags[fe.Field]; ok {
			return &SettingError{Setting: name, Msg: fe.Msg}
		}
	}
	return &SettingError{Setting: "settings", Msg: err.Error()}
}

// setDefaults fills in what cfg leaves at zero.
func setDefaults(cfg *Config) {
	if cfg.FenceMode == "" {
		cfg.FenceMode = DefaultFenceMode
	}
	if cfg.FenceTimeout <= 0 {
		cfg.FenceTimeout = DefaultFenceTimeout
	}
	if cfg.MaxVal <= 0 {
		cfg.MaxVal = DefaultMaxVal
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.ShimGrace <= 0 {
		cfg.ShimGrace = DefaultShimGrace
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	// Every task's lines and gopmi's own messages share them.
	if _, ok := cfg.Stdout.(*sink); !ok {
		cfg.Stdout = &sink{w: cfg.Stdout}
	}
	if _, ok := cfg.Stderr.(*sink); !ok {
		cfg.Stderr = &sink{w: cfg.Stderr}
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
		if cfg.Hostname == "" {
			cfg.Hostname = "localhost"
		}
	}
}

// FindBinary locates one of gopmi's binaries: the explicit path, the
// environment override, next to this executable or a sibling binary (and
// their symlink targets), then PATH.
func FindBinary(name, explicit, envVar, self, sibling string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv(envVar)
	}
	if explicit != "" {
		if err := execpath.Check(explicit); err != nil {
			return "", fmt.Errorf("%s: %s is not an executable file: %w", name, explicit, err)
		}
		return filepath.Abs(explicit)
	}
	dirs := append(execpath.Beside(self), execpath.Beside(sibling)...)
	p, searched := execpath.Find(name, append(dirs, execpath.PathDirs(os.Getenv("PATH"))...)...)
	if p == "" {
		return "", fmt.Errorf("cannot find %s in %s (next to gopmi, then PATH); install it there or set %s", name, strings.Join(searched, ":"), envVar)
	}
	return p, nil
}
