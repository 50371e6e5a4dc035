//go:build pmix

package pmix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
)

// DirPrefix begins the name of a PMIx server's directory in TMPDIR:
// gopmi-pmix-<nspace>.<node>-<random>. Its shim removes it when it ends;
// a step daemon removes a killed shim's.
const DirPrefix = "gopmi-pmix-"

// Face serves one PMIx job's tasks on this node for a shim (the
// signature of shim.PMIxFace): it makes the process a PMIx server in a
// private directory, registers the job, and returns the tasks'
// environment without PMIX_RANK (the same for every rank otherwise), and
// wait, which returns once every local task finalized or ctx ended, after
// the server stopped. fence bounds each fence the node's clients gave no
// time-out (PMIX_TIMEOUT) once libpmix hands it over: libpmix itself
// waits for every local client of a fence, without one.
func Face(ctx context.Context, job plugin.Job, node int32, fence time.Duration, be plugin.Full, log zerolog.Logger) ([]string, func(context.Context) error, error) {
	// Under the tools' system tmpdir, named for the job, so that a tool
	// narrowed to it (PMIX_SYSTEM_TMPDIR=<dir> pps) finds this server.
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%s.%d-", DirPrefix, job.Nspace, node))
	if err != nil {
		return nil, nil, fmt.Errorf("pmix: server directory: %w", err)
	}
	data := memoryDir(fmt.Sprintf("%s%s.%d-", DirPrefix, job.Nspace, node))
	s, err := Start(Options{Backend: be, TmpDir: dir, DataDir: data, ID: fmt.Sprintf("%s.%d", job.Nspace, node), Tools: true, Logger: log, FenceTimeout: fence})
	if err != nil {
		os.RemoveAll(dir)
		if data != "" {
			os.RemoveAll(data)
		}
		return nil, nil, err
	}
	stop := func() {
		if err := s.Close(); err != nil {
			log.Warn().Err(err).Msg("pmix: close the server")
		}
		os.RemoveAll(dir)
		if data != "" {
			os.RemoveAll(data)
		}
	}
	done := s.watchFinalized(job.Nspace)
	envs, err := s.RegisterJob(job, node)
	if err != nil {
		stop()
		return nil, nil, err
	}
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

// finalizes tracks, per job, the local clients that have not finalized
// yet; guarded by Server.mu.
type finalizes struct {
	done  map[string]chan struct{}  // closed once ranks is empty
	ranks map[string]map[int32]bool // the local ranks still to finalize
}

// watchFinalized returns a channel closed once every local rank of the
// job nspace (registered next) finalized.
func (s *Server) watchFinalized(nspace string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fin.done == nil {
		s.fin.done, s.fin.ranks = map[string]chan struct{}{}, map[string]map[int32]bool{}
	}
	ch := make(chan struct{})
	s.fin.done[nspace] = ch
	return ch
}

// expectClients sets which local clients of nspace must finalize.
// Called with mu held.
func (s *Server) expectClients(nspace string, ranks []int32) {
	if s.fin.done == nil || s.fin.done[nspace] == nil {
		return
	}
	s.fin.ranks[nspace] = map[int32]bool{}
	for _, r := range ranks {
		s.fin.ranks[nspace][r] = true
	}
	if len(ranks) == 0 {
		close(s.fin.done[nspace])
	}
}

// finalized counts p's finalize.
func (s *Server) finalized(p plugin.Proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ranks := s.fin.ranks[p.Nspace]
	if !ranks[p.Rank] {
		return
	}
	delete(ranks, p.Rank)
	if len(ranks) == 0 {
		close(s.fin.done[p.Nspace])
	}
}

// shmDir is where memoryDir makes the shared data store's directory.
const shmDir = "/dev/shm"

// memoryDir makes a directory for libpmix's shared data store in
// /dev/shm when that is a tmpfs, named from prefix and this process's
// ID, or returns "" (the store then stays in the server's directory in
// TMPDIR). Where TMPDIR is on a disk, as on this VM's ext4, every page
// of the store that the server or a client first touches costs a block
// of the file system: a third of the 11 ms of a node's CPU that libpmix
// takes when a job's first client connects (it zeroes its segments), as
// Slurm's mpi/pmix pays in its TmpFS. A server killed before it cleans
// up (a step's end by SIGKILL) leaves its directory: the next server of
// the same user removes those whose process is gone (sweepMemoryDirs).
func memoryDir(prefix string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	sweepMemoryDirs()
	dir, err := os.MkdirTemp(shmDir, fmt.Sprintf("%s%d.", prefix, os.Getpid()))
	if err != nil {
		return ""
	}
	return dir
}

// sweepMemoryDirs removes the data-store directories in /dev/shm of this
// user's servers that are gone: their names end in "<pid>.<random>".
func sweepMemoryDirs() {
	ents, err := os.ReadDir(shmDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, DirPrefix) {
			continue
		}
		i := strings.LastIndexByte(name, '.')
		j := strings.LastIndexAny(name[:max(i, 0)], "-.")
		if i < 0 || j < 0 {
			continue
		}
		pid, err := strconv.Atoi(name[j+1 : i])
		if err != nil || pid <= 0 {
			continue
		}
		dir := filepath.Join(shmDir, name)
		var st syscall.Stat_t
		if syscall.Stat(dir, &st) != nil || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// tmpfsMagic is a tmpfs's f_type (linux/magic.h).
const tmpfsMagic = 0x01021994
