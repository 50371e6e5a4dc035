//go:build pmix

package pmix

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/sockdir"
)

// DirPrefix begins the name of a PMIx server's directory in TMPDIR
// (sockdir.PMIxPrefix, which step daemons that link no libpmix use).
const DirPrefix = sockdir.PMIxPrefix

// Face serves one PMIx job's tasks on this node for a shim (the
// signature of shim.PMIxFace): it makes the process a PMIx server in a
// private directory, registers the job, and returns the tasks'
// environment without PMIX_RANK (the same for every rank otherwise), and
// wait, which returns once every local task finalized or ctx ended, or
// with the error of a fence that timed out at the run's time-out (which
// ends the job), after the server stopped. fence bounds each fence the node's clients gave no
// time-out (PMIX_TIMEOUT) once libpmix hands it over: libpmix itself
// waits for every local client of a fence, without one.
func Face(ctx context.Context, job plugin.Job, node int32, fence time.Duration, be plugin.Full, rendezvous *os.File, log zerolog.Logger) ([]string, func(context.Context) error, error) {
	// Under the tools' system tmpdir, named for the job, so that a tool
	// narrowed to it (PMIX_SYSTEM_TMPDIR=<dir> pps) finds this server.
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%s.%d-", DirPrefix, job.Nspace, node))
	if err != nil {
		return nil, nil, fmt.Errorf("pmix: server directory: %w", err)
	}
	data, dropData := memoryDir(job.Nspace, node)
	if data == "" {
		log.Debug().Str("dir", dir).Msg("pmix: the shared data store stays in TMPDIR (no tmpfs with room at " + shmDir + ")")
	}
	s, err := Start(Options{Backend: be, TmpDir: dir, DataDir: data, ID: ServerID(job.Nspace, node), Tools: true, Logger: log, FenceTimeout: fence, Rendezvous: rendezvous})
	if err != nil {
		os.RemoveAll(dir)
		dropData()
		return nil, nil, err
	}
	stop := func() {
		// The process ends next: libpmix is left, not finalized, once
		// it has sent what it queued (the last clients' finalize).
		if err := s.Leave(); err != nil {
			log.Warn().Err(err).Msg("pmix: close the server")
		}
		os.RemoveAll(dir)
		dropData()
	}
	done := s.eng.Finalized(job.Nspace)
	envs, err := s.RegisterJob(job, node)
	if err != nil {
		stop()
		return nil, nil, err
	}
	// The clients waiting at a rendezvous may come in now.
	s.OpenGate()
	env, err := common(envs)
	if err != nil {
		stop()
		return nil, nil, err
	}
	wait := func(ctx context.Context) error {
		defer stop()
		select {
		case <-done:
			return nil
		case <-s.eng.Failed():
			return s.eng.Err()
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return env, wait, nil
}

// common is the environment setup_fork gave every rank, less PMIX_RANK,
// or an error if ranks differ otherwise.
func common(envs map[int32][]string) ([]string, error) {
	var out []string
	first := true
	for r, env := range envs {
		env = slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, "PMIX_RANK=") })
		slices.Sort(env)
		if first {
			out, first = env, false
			continue
		}
		if !slices.Equal(out, env) {
			return nil, fmt.Errorf("pmix: rank %d's environment differs from another rank's beyond PMIX_RANK", r)
		}
	}
	return out, nil
}

// shmDir is where memoryDir makes the shared data store's directory.
const shmDir = "/dev/shm"

// DataDirPrefix begins the name of a server's data-store directory in
// /dev/shm: DataDirPrefix + "<job>.<node>-<random>".
const DataDirPrefix = sockdir.PMIxDataPrefix

// shmMinFree is the free space /dev/shm must have for the data store to
// go there: a job's store starts at 8 MB (libpmix's segments, sparse
// until written) and grows with its data, and a client that touches a
// page a full tmpfs cannot give dies of SIGBUS (Docker's /dev/shm is 64
// MB), where a disk would only be slower.
const shmMinFree = 256 << 20

// memoryDir makes a directory for libpmix's shared data store in
// /dev/shm when that is a tmpfs with room, named for node of job, and
// returns it with drop, which removes it and gives up its lock once the
// server stopped; or "" and a drop that does nothing (the store then
// stays in the server's directory in TMPDIR). Where TMPDIR is on a disk,
// as on this VM's ext4, every page of the store that the server or a client first touches
// costs a block of the file system: a third of the 11 ms of a node's CPU
// that libpmix takes when a job's first client connects (it zeroes its
// segments), as Slurm's mpi/pmix pays in its TmpFS. The directory is
// locked (flock) while its server lives: a server killed before it
// cleans up (a step's end by SIGKILL) leaves it unlocked, and the next
// server of the same user removes it (sockdir.SweepStale).
func memoryDir(job string, node int32) (string, func()) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &st); err != nil || st.Type != tmpfsMagic || st.Bavail*uint64(st.Bsize) < shmMinFree {
		return "", func() {}
	}
	sockdir.SweepStale(shmDir, DataDirPrefix)
	d, err := sockdir.Make(shmDir, fmt.Sprintf("%s%s.%d-", DataDirPrefix, job, node))
	if err != nil {
		return "", func() {}
	}
	return d.Path, func() { _ = d.Remove() }
}

// tmpfsMagic is a tmpfs's f_type (linux/magic.h).
const tmpfsMagic = 0x01021994
