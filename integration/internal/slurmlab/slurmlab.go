// Package slurmlab runs a real Slurm cluster on this machine for the
// integration tests: munged with a private key and socket, slurmctld and
// several slurmd (Debian's Slurm is built with --enable-multiple-slurmd,
// so each `slurmd -N nX` is a node of its own), all in a temporary
// directory, on free ports, with the mpi/gopmi plugin in a PluginDir of
// their own. Nothing outside the directory is touched; Stop ends every
// daemon it started. It needs root (slurmd runs tasks as their user),
// munge, and Debian's slurm-wlm or a Slurm installed in a prefix of its
// own (Options.Prefix: one ../shared/vendor/slurm/build.sh built, a
// site's), itself built with --enable-multiple-slurmd.
package slurmlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// InstallHint says what the cluster needs.
const InstallHint = "apt-get install slurm-wlm munge build-essential dpkg-dev (as root; .ci/run installs them)"

// Options describe the cluster.
type Options struct {
	// Nodes is the number of slurmd; default 2.
	Nodes int
	// CPUs is each node's CPU count as Slurm sees it; default 32 (tasks
	// may outnumber the real cores).
	CPUs int
	// Plugin is a built mpi_gopmi.so. Empty: with BinDir, Start builds
	// one with contrib/slurm/build.sh for the gopmi binaries there; without
	// either, the cluster runs without gopmi.
	Plugin string
	// BinDir holds the gopmi binaries the built plugin runs.
	BinDir string
	// MPIConf is written as mpi.conf beside slurm.conf when not empty.
	MPIConf string
	// OwnHostnames runs each slurmd in a UTS namespace of its own whose
	// hostname is its node's name (root only): its steps' tasks see
	// n1, n2, ... as on a real cluster, not the one host's name, which
	// every node of the lab otherwise shares.
	OwnHostnames bool
	// Extra are more built plugins, copied into the cluster's plugin
	// directory under their own names: an earlier build of mpi/gopmi
	// renamed (mpi_gopmio.so, plugin_type "mpi/gopmio"), to measure it
	// beside this one's, run by run (srun --mpi=gopmio).
	Extra []string
	// Prefix is the Slurm install the cluster runs (its sbin, bin and
	// lib/slurm), e.g. /opt/slurm-25.11; empty: the Slurm on PATH
	// (Debian's). A plugin Start builds is built against its configured
	// source, Prefix/src.
	Prefix string
}

// Cluster is a running cluster.
type Cluster struct {
	Dir     string
	temp    string // the directory Start made, removed by Stop
	Conf    string
	Nodes   []string
	prefix  string      // Options.Prefix
	binDir  string      // Options.BinDir
	daemons []*exec.Cmd // munged, slurmctld, then each slurmd
}

// Bin is the path of Slurm's command name (srun, sinfo, slurmd, ...) in
// the cluster's install, or name itself for the one on PATH.
func (c *Cluster) Bin(name string) string { return slurmBin(c.prefix, name) }

func slurmBin(prefix, name string) string {
	if prefix == "" {
		return name
	}
	for _, d := range []string{"bin", "sbin"} {
		if p, err := exec.LookPath(filepath.Join(prefix, d, name)); err == nil {
			return p
		}
	}
	return name
}

// Release is the cluster's Slurm release ("22.05.8"), from slurmd -V.
func (c *Cluster) Release() string { return Release(c.prefix) }

// Release is the release of the Slurm installed in prefix (empty: on
// PATH), or "" when there is none.
func Release(prefix string) string {
	out, err := exec.Command(slurmBin(prefix, "slurmd"), "-V").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) == 2 {
		return f[1]
	}
	return ""
}

// Plugin is the mpi_gopmi.so the cluster loads, or "" without gopmi.
func (c *Cluster) Plugin() string {
	p := filepath.Join(c.Dir, "plugins", "mpi_gopmi.so")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TmpDir is node's own temporary directory: its TmpFS and its slurmd's
// TMPDIR.
func (c *Cluster) TmpDir(node string) string { return filepath.Join(c.Dir, "tmp", node) }

// Env is what a command needs to reach the cluster (srun, sinfo): with
// an install of its own, its commands come first on PATH (a step's
// nested srun, salloc's srun); with gopmi's binaries, srun's side of the
// plugin (which reads no mpi.conf) finds them through GOPMI_BINDIR,
// whatever the plugin was built for.
func (c *Cluster) Env() []string {
	env := []string{"SLURM_CONF=" + c.Conf}
	if c.binDir != "" {
		env = append(env, "GOPMI_BINDIR="+c.binDir)
	}
	if c.prefix != "" {
		env = append(env, "PATH="+filepath.Join(c.prefix, "bin")+":"+filepath.Join(c.prefix, "sbin")+":"+os.Getenv("PATH"))
	}
	return env
}

// Check reports what is missing to run a cluster here, of the Slurm in
// prefix (empty: on PATH).
func Check(prefix string) error {
	if os.Geteuid() != 0 {
		return errors.New("a Slurm cluster needs root: slurmd starts tasks as their user")
	}
	var miss []string
	for _, b := range []string{"munged", "mungekey"} {
		if _, err := exec.LookPath(b); err != nil {
			miss = append(miss, b)
		}
	}
	for _, b := range []string{"slurmctld", "slurmd", "srun", "sinfo", "scancel"} {
		if _, err := exec.LookPath(slurmBin(prefix, b)); err != nil {
			miss = append(miss, b)
		}
	}
	if len(miss) > 0 {
		if prefix != "" {
			return fmt.Errorf("missing %s in %s (a Slurm built by ../shared/vendor/slurm/build.sh, or a site's) or on PATH", strings.Join(miss, ", "), prefix)
		}
		return fmt.Errorf("missing %s: %s", strings.Join(miss, ", "), InstallHint)
	}
	return nil
}

// pluginDir is the Slurm plugin directory of the install in prefix
// (empty: Debian's).
func pluginDir(prefix string) (string, error) {
	if prefix != "" {
		d := filepath.Join(prefix, "lib", "slurm")
		if _, err := os.Stat(filepath.Join(d, "mpi_pmi2.so")); err != nil {
			return "", fmt.Errorf("no Slurm plugin directory (mpi_pmi2.so) in %s", d)
		}
		return d, nil
	}
	m, _ := filepath.Glob("/usr/lib/*/slurm-wlm/mpi_pmi2.so")
	if len(m) == 0 {
		return "", fmt.Errorf("no Slurm plugin directory (mpi_pmi2.so) under /usr/lib: %s", InstallHint)
	}
	return filepath.Dir(m[0]), nil
}

// labPorts bounds the ports a cluster's daemons listen on: below Linux's
// ephemeral ports (32768 and up), which any connection of the tests may
// take as its source port between the choice and slurmd's bind (a node
// then never comes up), and below mpi/gopmi's tree ports (20000 and up).
const labPortLow, labPortHigh = 10000, 19999

// consecutive finds n free consecutive ports in the lab's range (slurmd
// -N takes its port from a range in the node line; slurmctld takes one).
func consecutive(n int) (int, error) {
	for try := 0; try < 200; try++ {
		base := labPortLow + rand.IntN(labPortHigh-labPortLow-n)
		ok := true
		var ls []net.Listener
		for i := 0; i < n && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no range of free ports")
}

// daemon starts a daemon in the foreground as a child that the kernel
// kills if the test process dies first: a test killed half-way leaves no
// cluster behind. Its output goes to log/<name>.out.
func (c *Cluster) daemon(name string, args ...string) error {
	return c.daemonEnv(name, nil, args...)
}

// daemonEnv is daemon with env added to the cluster's environment.
func (c *Cluster) daemonEnv(name string, env []string, args ...string) error {
	out, err := os.Create(filepath.Join(c.Dir, "log", name+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), c.Env()...), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.daemons = append(c.daemons, cmd)
	return nil
}

// run runs a command that daemonizes: its output goes to a file, not a
// pipe, which the daemon could hold open.
func run(ctx context.Context, env []string, name string, args ...string) error {
	out, err := os.CreateTemp("", "slurmlab-*.out")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(b))
	}
	return nil
}

// Start brings a cluster up in dir (empty: a temporary directory, which
// Stop removes) and waits until every node is idle.
func Start(ctx context.Context, dir string, o Options) (c *Cluster, err error) {
	if err := Check(o.Prefix); err != nil {
		return nil, err
	}
	temp := ""
	if dir == "" {
		if temp, err = os.MkdirTemp("", "gopmi-slurm-"); err != nil {
			return nil, err
		}
		dir = filepath.Join(temp, "cluster")
		defer func() {
			if err != nil {
				os.RemoveAll(temp)
			}
		}()
		// munged wants every directory above its socket enterable.
		if err := os.Chmod(temp, 0o755); err != nil {
			return nil, err
		}
	}
	if o.Plugin == "" && o.BinDir != "" {
		o.Plugin = filepath.Join(filepath.Dir(dir), "mpi_gopmi.so")
		if err := BuildPlugin(ctx, o.Prefix, o.BinDir, o.Plugin); err != nil {
			return nil, err
		}
	}
	if o.Nodes <= 0 {
		o.Nodes = 2
	}
	if o.CPUs <= 0 {
		o.CPUs = 32
	}
	pdir, err := pluginDir(o.Prefix)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), temp: temp, prefix: o.Prefix, binDir: o.BinDir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, d := range []string{"munge", "state", "spool", "log", "run", "plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return c, err
		}
	}
	if o.Plugin != "" {
		b, err := os.ReadFile(o.Plugin)
		if err != nil {
			return c, err
		}
		if err := os.WriteFile(filepath.Join(dir, "plugins", "mpi_gopmi.so"), b, 0o755); err != nil {
			return c, err
		}
	}
	for _, p := range o.Extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return c, err
		}
		if err := os.WriteFile(filepath.Join(dir, "plugins", filepath.Base(p)), b, 0o755); err != nil {
			return c, err
		}
	}
	// munged insists on a socket directory everyone may enter.
	if err := os.Chmod(filepath.Join(dir, "munge"), 0o755); err != nil {
		return c, err
	}
	// ... and on no group- or world-writable directory above it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return c, err
	}
	key := filepath.Join(dir, "munge", "munge.key")
	sock := filepath.Join(dir, "munge", "munge.sock")
	if err := run(ctx, nil, "mungekey", "-c", "-k", key); err != nil {
		return c, err
	}
	if err := c.daemon("munged", "munged", "-F", "-S", sock, "--key-file="+key,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed")); err != nil {
		return c, err
	}
	if err := waitFile(ctx, sock); err != nil {
		return c, fmt.Errorf("munged: %w", err)
	}
	// slurmctld's port, then one per slurmd.
	ctld, err := consecutive(o.Nodes + 1)
	if err != nil {
		return c, err
	}
	base := ctld + 1
	nodes := "n[1-" + strconv.Itoa(o.Nodes) + "]"
	for i := 1; i <= o.Nodes; i++ {
		c.Nodes = append(c.Nodes, "n"+strconv.Itoa(i))
		// Each node's TmpFS: Slurm's mpi/pmix (the peer gopmi is
		// measured against) keeps its per-step directory there, and two
		// nodes sharing /tmp collide on it.
		if err := os.MkdirAll(filepath.Join(dir, "tmp", c.Nodes[i-1]), 0o1777); err != nil {
			return c, err
		}
		if err := os.Chmod(filepath.Join(dir, "tmp", c.Nodes[i-1]), 0o1777); err != nil {
			return c, err
		}
	}
	conf := fmt.Sprintf(`ClusterName=gopmi
SlurmctldHost=%[1]s(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[2]s
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool/%%n
TmpFS=%[3]s/tmp/%%n
SlurmctldPidFile=%[3]s/run/slurmctld.pid
SlurmdPidFile=%[3]s/run/slurmd-%%n.pid
SlurmctldLogFile=%[3]s/log/slurmctld.log
SlurmdLogFile=%[3]s/log/slurmd-%%n.log
SlurmctldPort=%[4]d
SlurmdPort=%[5]d
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
PluginDir=%[6]s:%[3]s/plugins
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldDebug=info
SlurmdDebug=debug
KillWait=2
NodeName=%[7]s NodeHostname=%[1]s NodeAddr=127.0.0.1 Port=%[5]d-%[8]d CPUs=%[9]d State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, host, sock, dir, ctld, base, pdir, nodes, base+o.Nodes-1, o.CPUs)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		return c, err
	}
	if o.MPIConf != "" {
		if err := os.WriteFile(filepath.Join(dir, "mpi.conf"), []byte(o.MPIConf), 0o644); err != nil {
			return c, err
		}
	}
	if err := c.daemon("slurmctld", c.Bin("slurmctld"), "-D", "-i"); err != nil {
		return c, err
	}
	for _, n := range c.Nodes {
		// Each slurmd's stepds keep their TMPDIR's files (mpi/gopmi's
		// PMIx step directories) in the node's own directory: the
		// tests see what a step left behind there, and nothing of
		// another cluster's.
		argv := []string{c.Bin("slurmd"), "-D", "-N", n}
		if o.OwnHostnames {
			argv = []string{"unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$1" -D -N "$0"`, n, c.Bin("slurmd")}
		}
		if err := c.daemonEnv("slurmd-"+n, []string{"TMPDIR=" + c.TmpDir(n)}, argv...); err != nil {
			return c, err
		}
	}
	return c, c.waitIdle(ctx)
}

// waitIdle waits until sinfo shows every node idle.
func (c *Cluster) waitIdle(ctx context.Context) error {
	var last string
	for {
		cmd := exec.CommandContext(ctx, c.Bin("sinfo"), "-h", "-N", "-o", "%N %T")
		cmd.Env = append(os.Environ(), c.Env()...)
		out, _ := cmd.CombinedOutput()
		last = strings.TrimSpace(string(out))
		idle := 0
		for _, l := range strings.Split(last, "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		if idle == len(c.Nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes did not come up (sinfo: %q): %w; see %s/log", last, ctx.Err(), c.Dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Log returns the tail of a daemon's log ("slurmctld", "slurmd-n1").
func (c *Cluster) Log(name string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log", name+".log"))
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Stop ends the daemons, slurmd first and munged last, each within a few
// seconds (SIGKILL after).
func (c *Cluster) Stop() {
	for i := len(c.daemons) - 1; i >= 0; i-- {
		cmd := c.daemons[i]
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	c.daemons = nil
	if c.temp != "" {
		os.RemoveAll(c.temp)
	}
}

// BuildPlugin builds mpi/gopmi with contrib/slurm/build.sh into out, for
// the gopmi binaries in binDir, against the Slurm installed in prefix
// (its configured source, prefix/src; empty: Debian's).
func BuildPlugin(ctx context.Context, prefix, binDir, out string) error {
	script, err := buildScript()
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	// The plugin goes with the binaries' release (gopmi-slurm check).
	v, err := exec.CommandContext(ctx, filepath.Join(bin, "gopmi-slurm"), "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", filepath.Join(bin, "gopmi-slurm"), err)
	}
	cmd := exec.CommandContext(ctx, script, out)
	cmd.Env = append(os.Environ(), "BINDIR="+bin, "SLURM_PREFIX="+prefix, "SLURM_SRC=", "GOPMI_VERSION="+strings.TrimSpace(string(v)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("contrib/slurm/build.sh: %w\n%s", err, b)
	}
	return nil
}

// buildScript finds contrib/slurm/build.sh from this source file, else
// from the working directory up.
func buildScript() (string, error) {
	const rel = "contrib/slurm/build.sh"
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
			return filepath.Join(d, rel), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s not found from %s: run from the gopmi source tree", rel, wd)
		}
	}
}

func waitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not appear: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
