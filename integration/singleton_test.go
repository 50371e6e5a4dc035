package integration

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// mpiexecDir is a directory whose mpiexec is gopmi, as a site installs it
// for MPICH's singletons (a link named mpiexec, earlier in PATH).
func mpiexecDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(gopmiBin, filepath.Join(dir, "mpiexec")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSingletonMPICH: an MPICH program started from a shell, with no
// process manager, runs: MPICH 4.0's MPI_Init asks for one (singleton
// init), runs "mpiexec -pmi_args ..." from PATH, and gopmi serves it. With
// Debian's mpiexec (Hydra 4.0.2, which does not know -pmi_args) the same
// program waits in MPI_Init forever.
func TestSingletonMPICH(t *testing.T) {
	begin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog(t, clients.MPIHello))
	cmd.Env = append(os.Environ(), "PATH="+mpiexecDir(t)+":"+os.Getenv("PATH"))
	cmd.Env = removeEnv(cmd.Env, "PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMI_ID")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "size=1") || strings.Contains(string(out), "failed") {
		t.Fatalf("a singleton MPICH hello: %v\n%s", err, out)
	}
}

func removeEnv(env []string, keys ...string) []string {
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		keep := true
		for _, d := range keys {
			keep = keep && k != d
		}
		if keep {
			out = append(out, e)
		}
	}
	return out
}

// TestSingletonSpawn: this test is the singleton, speaking MPICH's simple
// PMI-1 client's part of singleton init byte for byte: it listens, runs
// "mpiexec -pmi_args PORT default_interface default_key PID" (gopmi),
// answers its cmd=singinit, and as rank 0 of a job of one spawns two
// PMI-1 programs (Debian's MPICH cannot spawn: its ch4 build has no
// MPI_Open_port); they run, and gopmi ends once the singleton finalized
// and its children ended.
func TestSingletonSpawn(t *testing.T) {
	begin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	pm := exec.CommandContext(ctx, filepath.Join(mpiexecDir(t), "mpiexec"), "-pmi_args", port, "default_interface", "default_key", strconv.Itoa(os.Getpid()))
	var pmOut strings.Builder
	pm.Stdout, pm.Stderr = &pmOut, &pmOut
	if err := pm.Start(); err != nil {
		t.Fatal(err)
	}
	pmDone := make(chan error, 1)
	go func() { pmDone <- pm.Wait() }()
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("gopmi mpiexec never connected: %v\n%s", err, pmOut.String())
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(40 * time.Second))
	r := bufio.NewReader(c)
	talk := func(send, want string) string {
		t.Helper()
		if send != "" {
			if _, err := c.Write([]byte(send + "\n")); err != nil {
				t.Fatalf("send %q: %v", send, err)
			}
		}
		line, err := r.ReadString('\n')
		got := strings.Fields(line)
		ok := err == nil && len(got) > 0
		for i, w := range strings.Fields(want) {
			ok = ok && (i == 0 && got[0] == w || i > 0 && slices.Contains(got, w))
		}
		if !ok {
			t.Fatalf("after %q: read %q (%v), want the fields %q\n%s", send, line, err, want, pmOut.String())
		}
		return strings.TrimSpace(line)
	}
	talk("", "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none")
	info := talk("cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=none", "cmd=singinit_info rc=0")
	if !strings.Contains(info, " versionok=yes") || !strings.Contains(info, " stdio=no") || !strings.Contains(info, " kvsname=gopmi.") {
		t.Fatalf("singinit_info: %q", info)
	}
	kvsname := info[strings.Index(info, "kvsname=")+len("kvsname="):]
	talk("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	talk("cmd=get_maxes", "cmd=maxes rc=0")
	talk("cmd=put kvsname="+kvsname+" key= value=", "cmd=put_result rc=0")
	talk("cmd=get_universe_size", "cmd=universe_size rc=0 size=1")
	child := prog(t, clients.PMI1Only)
	talk("mcmd=spawn\nnprocs=2\nexecname="+child+"\ntotspawns=1\nspawnssofar=1\nargcnt=1\narg1=g=1\npreput_num=0\ninfo_num=0\nendcmd", "cmd=spawn_result rc=0")
	talk("cmd=finalize", "cmd=finalize_ack")
	c.Close()
	select {
	case err := <-pmDone:
		out := pmOut.String()
		if err != nil || strings.Count(out, "ok pmi1 ") != 2 || !strings.Contains(out, "size=2") {
			t.Fatalf("gopmi mpiexec: %v\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("gopmi mpiexec did not end after the singleton finalized\n%s", pmOut.String())
	}
}
