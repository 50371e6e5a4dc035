package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// nodeDaemon is a `gopmi daemon` the test started.
type nodeDaemon struct {
	cmd  *exec.Cmd
	sock string
	log  *plugintest.Buffer
	done chan struct{}
}

// worldDir is a temporary directory every user may enter and read: the
// daemon's socket and the binaries another user runs live there.
func worldDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gopmi-daemon-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// testDaemon is a node daemon on a socket in a fresh world-enterable
// directory, until the test ends.
func testDaemon(t *testing.T) (*nodeDaemon, string) {
	t.Helper()
	dir := worldDir(t)
	return startNodeDaemon(t, filepath.Join(dir, "d.sock"), filepath.Join(dir, "state")), dir
}

// twoRuns says how a client run and a serving run ended, and what the
// daemon logged: the failure message of the tests that run both.
func twoRuns(cr, sr clients.Result, d *nodeDaemon) string {
	return fmt.Sprintf("client: exit %d\n%s\n%s\nserver: exit %d\n%s\n%s\ndaemon:\n%s", cr.ExitCode, cr.Stdout, cr.Stderr,
		sr.ExitCode, sr.Stdout, sr.Stderr, d.log.String())
}

// startNodeDaemon runs `gopmi daemon` on sock with its state in state
// (none: ""), and flags, until the test ends (or kill).
func startNodeDaemon(t *testing.T, sock, state string, flags ...string) *nodeDaemon {
	t.Helper()
	d := &nodeDaemon{sock: sock, log: &plugintest.Buffer{}, done: make(chan struct{})}
	args := []string{"daemon", "-socket", sock, "-log-level", "debug"}
	if state != "" {
		args = append(args, "-state", state)
	}
	d.cmd = exec.Command(gopmiBin, append(args, flags...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.kill(syscall.SIGTERM) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("gopmi daemon exited: %s", d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gopmi daemon did not listen on %s: %s", sock, d.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *nodeDaemon) kill(sig syscall.Signal) {
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// bgRun is a gopmi run in the background.
type bgRun struct {
	res  clients.Result
	err  error
	done chan struct{}
}

func startRun(ctx context.Context, argv []string, env []string, cred *syscall.Credential, dir string) *bgRun {
	r := &bgRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = clients.Run(ctx, argv, clients.RunOptions{Env: env, Credential: cred, Dir: dir})
	}()
	return r
}

func (r *bgRun) wait(t *testing.T, what string) clients.Result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s never ended", what)
	}
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.res
}

// daemonArgv is `gopmi run -daemon sock args...` in this run's serve mode.
func daemonArgv(sock string, args ...string) []string {
	return gopmiArgv(append([]string{"-daemon", sock}, args...)...)
}

// ask runs a gopmi tool against the daemon and returns its stdout.
func ask(t *testing.T, cred *syscall.Credential, args ...string) string {
	t.Helper()
	return askWith(t, gopmiBin, cred, args...)
}

// askWith is ask with the gopmi binary bin (one another user may run).
func askWith(t *testing.T, bin string, cred *syscall.Credential, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := clients.Run(ctx, append([]string{bin}, args...), clients.RunOptions{Credential: cred})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("gopmi %s: %v, exit %d: %s", strings.Join(args, " "), err, r.ExitCode, r.Stderr)
	}
	return r.Stdout
}

// waitFor polls cond every 20 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Names published in one gopmi run are found by another, started
// separately, through the node daemon: with Slurm's libpmi2 and with
// MPICH's MPI_Publish_name / MPI_Lookup_name. gopmi ps shows the running
// job with its ranks' pids.
func TestDaemonNamesAcrossRuns(t *testing.T) {
	begin(t)
	d, _ := testDaemon(t)
	for _, c := range []struct {
		name, prog, serve, client, want string
		n                               string
	}{
		{"libpmi2", progs[clients.PMI2Test], "ns-serve", "ns-client", "step=xrun-ack value=ack-from-", "2"},
		{"mpich", progs[clients.MPIPubname], "serve", "client", "step=xack value=ack-", "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			server := startRun(ctx, daemonArgv(d.sock, "-n", c.n, c.prog, c.serve), nil, nil, "")
			// The serving job shows in gopmi ps, with its ranks' pids.
			waitFor(t, "the serving job in gopmi ps", func() bool {
				var jobs []struct {
					Nspace string `json:"nspace"`
					Size   int    `json:"size"`
					Pids   []int  `json:"pids"`
					State  string `json:"state"`
				}
				if err := json.Unmarshal([]byte(ask(t, nil, "ps", "-json", "-daemon", d.sock)), &jobs); err != nil {
					t.Fatal(err)
				}
				for _, j := range jobs {
					if strconv.Itoa(j.Size) == c.n && j.State == "running" && len(j.Pids) == j.Size && j.Pids[0] > 0 {
						return true
					}
				}
				return false
			})
			client := startRun(ctx, daemonArgv(d.sock, "-n", "1", c.prog, c.client), nil, nil, "")
			cr := client.wait(t, "the client run")
			sr := server.wait(t, "the serving run")
			if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(sr.Stdout, c.want) {
				t.Fatal(twoRuns(cr, sr, d))
			}
		})
	}
	// Both runs ended: their names went with them.
	if out := ask(t, nil, "query", "-json", "-daemon", d.sock, "gopmi.names"); strings.Contains(out, "gopmi-x") {
		t.Errorf("names left after their runs ended: %s", out)
	}
}

// testUser is an unprivileged user the tests create to be refused.
func testUser(t *testing.T) *syscall.Credential {
	t.Helper()
	return namedTestUser(t, "gopmi-it")
}

// namedTestUser is testUser of another name: a second ordinary user.
func namedTestUser(t *testing.T, name string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): another user's refusal needs root to create and become that user")
	}
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// copyExec copies an executable into dir, mode 0755, for another user.
func copyExec(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Another user can neither read a name, nor see the job in gopmi ps, and
// each refusal is a clear error (the PMI answer's message, which libpmi2
// does not show; the daemon's unit tests check its text) and a line in
// the daemon's log with the caller's uid.
func TestDaemonOtherUserRefused(t *testing.T) {
	begin(t)
	cred := testUser(t)
	d, dir := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	finish := serveName(t, ctx, d)

	bin := copyExec(t, gopmiBin, dir)
	for _, b := range []string{"gopmi-shim", "gopmi-rm-local"} {
		copyExec(t, filepath.Join(binDir, b), dir)
	}
	prog := copyExec(t, progs[clients.PMI2Test], dir)
	argv := append([]string{bin}, daemonArgv(d.sock, "-n", "1", prog, "ns-peek")[1:]...)
	r := startRun(ctx, argv, []string{"HOME=" + dir}, cred, dir).wait(t, "the other user's run")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "step=xrun-peek rc=") || strings.Contains(r.Stdout, "step=xrun-peek rc=0 ") {
		t.Fatalf("the other user's lookup: exit %d\n%s\n%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	names := askWith(t, bin, cred, "query", "-json", "-daemon", d.sock, "gopmi.names")
	ps := askWith(t, bin, cred, "ps", "-json", "-daemon", d.sock)
	if strings.Contains(names, "gopmi-xrun") || strings.Contains(ps, "pmi2_test\"") && strings.Contains(ps, `"uid": 0`) {
		t.Errorf("the other user sees root's names or jobs:\n%s\n%s", names, ps)
	}
	if want := fmt.Sprintf(`uid=%d`, cred.Uid); !strings.Contains(d.log.String(), `refused: lookup of gopmi-xrun: "gopmi-xrun" is published by another user`) ||
		!strings.Contains(d.log.String(), want) {
		t.Errorf("the daemon did not log the refusal with %s:\n%s", want, d.log.String())
	}
	finish() // lets the serving run end
}

// Another user cannot forge root's view of its jobs, nor learn that a
// name of root's exists (issue 31 item 6). She registers a job under the
// name of root's running job, with a command and a log line that hold a
// newline and terminal escapes, and leaves it lost: root's gopmi query of
// its job still answers from its own job ("running", not her lost one),
// its gopmi log of the job holds none of her lines, and gopmi ps and
// gopmi log show hers escaped, on a line of its own that names her. Her
// lookup of root's published name is answered as that of a name nobody
// published, byte for byte; the daemon logs the refusal with her uid.
func TestDaemonViewNotForged(t *testing.T) {
	begin(t)
	cred := testUser(t)
	her := userNameOf(t, cred.Uid)
	d, dir := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	finish := serveName(t, ctx, d)
	jobsOf := func() []plugin.JobInfo {
		var jobs []plugin.JobInfo
		if err := json.Unmarshal([]byte(ask(t, nil, "ps", "-a", "-json", "-daemon", d.sock)), &jobs); err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	var ns string
	for _, j := range jobsOf() {
		if j.UID == 0 && strings.Contains(j.Cmd, "pmi2_test") {
			ns = j.Nspace
		}
	}
	if ns == "" {
		t.Fatalf("root's job is not in gopmi ps: %+v", jobsOf())
	}

	self := copyExec(t, selfBin, dir)
	r, err := clients.Run(ctx, []string{self}, clients.RunOptions{Env: []string{forgeEnv + "=" + d.sock, forgeJobEnv + "=" + ns}, Credential: cred, Dir: dir})
	if err != nil || r.ExitCode != 0 || !strings.Contains(r.Stdout, "forged "+ns) {
		t.Fatalf("the forger: %v, exit %d\n%s\n%s", err, r.ExitCode, r.Stdout, r.Stderr)
	}
	waitFor(t, "her job of root's job's name, ended", func() bool {
		for _, j := range jobsOf() {
			if j.Nspace == ns && j.UID == cred.Uid && j.State != "running" {
				return true
			}
		}
		return false
	})

	if got := strings.TrimSpace(ask(t, nil, "query", "-daemon", d.sock, "-nspace", ns, plugin.QueryJobStatus)); got != plugin.QueryJobStatus+": running" {
		t.Errorf("root's query of its own job %s: %q, want it running", ns, got)
	}
	if own := ask(t, nil, "log", "-daemon", d.sock, ns); strings.Contains(own, "all good") || !strings.Contains(own, " root daemon: registered by run ") {
		t.Errorf("root's log of its own job %s holds her lines, or not its own:\n%s", ns, own)
	}
	ps := ask(t, nil, "ps", "-a", "-daemon", d.sock)
	all := ask(t, nil, "log", "-daemon", d.sock)
	for what, c := range map[string]struct{ out, seen string }{"gopmi ps -a": {ps, forgedCmdSeen}, "gopmi log": {all, forgedLogSeen}} {
		var hers string
		for _, line := range strings.Split(c.out, "\n") {
			if strings.Contains(line, c.seen) {
				hers = line
			}
		}
		if strings.ContainsAny(c.out, "\x1b") || strings.Contains(c.out, "\n4242 root") || strings.Contains(c.out, "\nall good") ||
			!strings.Contains(hers, ns) || !strings.Contains(hers, " "+her+" ") {
			t.Errorf("%s shows her text as root's, or raw, or not hers:\n%s", what, c.out)
		}
	}

	bin := copyExec(t, gopmiBin, dir)
	for _, b := range []string{"gopmi-shim", "gopmi-rm-local"} {
		copyExec(t, filepath.Join(binDir, b), dir)
	}
	argv := append([]string{bin}, daemonArgv(d.sock, "-n", "1", self, "peek", "names=gopmi-xrun,gopmi-nobody")[1:]...)
	p := startRun(ctx, argv, []string{"HOME=" + dir, taskRun}, cred, dir).wait(t, "her lookups")
	replies := map[string]string{}
	for _, line := range strings.Split(p.Stdout, "\n") {
		for _, name := range []string{"gopmi-xrun", "gopmi-nobody"} {
			if strings.Contains(line, " step="+name+" ") {
				replies[name] = strings.ReplaceAll(line, name, "NAME")
			}
		}
	}
	if p.ExitCode != 0 || replies["gopmi-xrun"] == "" || replies["gopmi-xrun"] != replies["gopmi-nobody"] || strings.Contains(replies["gopmi-xrun"], " rc=0 ") {
		t.Errorf("her lookup of root's name is told apart from one of a name nobody published: exit %d\n%s\n%s", p.ExitCode, p.Stdout, p.Stderr)
	}
	if want := fmt.Sprintf("uid=%d", cred.Uid); !strings.Contains(d.log.String(), `refused: lookup of gopmi-xrun: "gopmi-xrun" is published by another user`) || !strings.Contains(d.log.String(), want) {
		t.Errorf("the daemon did not log her refused lookup with %s:\n%s", want, d.log.String())
	}

	finish()
}

// Another user takes all the node daemon lets one user take, and holds
// it (issue 31 item 5): names to her quota (60 KiB values), a query of
// 10,000 keys, jobs of 64 KiB commands until refused and 25 MiB of log
// lines, 300 connections, a call that never ends. Each is refused
// at its bound with why, the log names her uid, the daemon stays small,
// and root's gopmi ps and a pair of root's runs that publish and look up
// are served meanwhile. Before, her value grew the daemon without end and
// every connection of hers was kept.
func TestDaemonFloodedByAnotherUser(t *testing.T) {
	begin(t)
	cred := testUser(t)
	d, dir := testDaemon(t)
	self := copyExec(t, selfBin, dir)
	out := startAs(t, cred, dir, []string{floodEnv + "=" + d.sock}, self)
	for deadline := time.Now().Add(120 * time.Second); !strings.Contains(out.String(), "holding\n"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not get to hold what it took:\n%s\ndaemon:\n%s", out.String(), d.log.String())
		}
	}
	said := out.String()
	for _, want := range []string{
		`refused="publish \"flood-`, `bytes one user may (keys and values; gopmi daemon -max-name-bytes)"`,
		`query refused="query: 10000 keys in one call; the node daemon answers 64 at most"`,
		// 256 with the job of her client's run.
		`jobs registered=255 refused="register: 256 jobs of gopmi-it are running on this node, the most one user may"`,
		// 256 with the one her client of the daemon holds.
		fmt.Sprintf("conns held=255 refused=45 why=\"the node daemon holds 256 connections of uid %d already", cred.Uid),
		"closed=true",
	} {
		if !strings.Contains(said, want) {
			t.Errorf("the flood was not refused as %q:\n%s", want, said)
		}
	}
	var mib int
	if _, err := fmt.Sscanf(said[strings.Index(said, "endless written="):], "endless written=%dMiB", &mib); err != nil || mib > 24 {
		t.Errorf("the daemon read %d MiB of a call that never ends (%v)", mib, err)
	}

	// Root is served while she holds it all.
	start := time.Now()
	ask(t, nil, "ps", "-daemon", d.sock)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("root's gopmi ps took %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
	client := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
	cr, sr := client.wait(t, "root's client run"), server.wait(t, "root's serving run")
	if cr.ExitCode != 0 || sr.ExitCode != 0 {
		t.Fatal(twoRuns(cr, sr, d))
	}
	if rss := vmRSS(t, d.cmd.Process.Pid); rss > 150<<20 {
		t.Errorf("the daemon holds %d MiB", rss>>20)
	} else {
		t.Logf("the daemon's RSS while she holds it all: %d MiB", rss>>20)
	}
	for _, want := range []string{fmt.Sprintf("uid=%d", cred.Uid), "connections of uid", "a connection closed: link: a frame over the server's limit", "keys in one call"} {
		if !strings.Contains(d.log.String(), want) {
			t.Errorf("the daemon's log lacks %q:\n%s", want, d.log.String())
		}
	}
}

// vmRSS is pid's resident memory in bytes.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// The daemon killed with SIGKILL and started again while a run waits:
// the run re-registers, the name it published before is found by a run
// started afterwards, and both finish.
func TestDaemonKilledAndRestarted(t *testing.T) {
	begin(t)
	dir := worldDir(t)
	sock, state := filepath.Join(dir, "d.sock"), filepath.Join(dir, "state")
	d := startNodeDaemon(t, sock, state)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	server := startRun(ctx, daemonArgv(sock, "-n", "2", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
	waitFor(t, "the name", func() bool {
		return strings.Contains(ask(t, nil, "query", "-daemon", sock, "gopmi.names"), "gopmi-xrun")
	})
	// The daemon writes its names from a goroutine of its own, so that
	// no call waits for the disk: a name is kept across a kill once it
	// is in the state (a loaded CI machine killed it before once).
	// A publish is a line appended to the journal beside the snapshot.
	waitFor(t, "the name in the state file", func() bool {
		snap, _ := os.ReadFile(filepath.Join(state, "names.json"))
		journal, _ := os.ReadFile(filepath.Join(state, "names.journal"))
		return strings.Contains(string(snap)+string(journal), "gopmi-xrun")
	})
	d.kill(syscall.SIGKILL)
	d2 := startNodeDaemon(t, sock, state)
	client := startRun(ctx, daemonArgv(sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
	cr := client.wait(t, "the client run")
	sr := server.wait(t, "the serving run")
	if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(cr.Stdout, "step=xrun-lookup value=served-by-") {
		t.Fatal(twoRuns(cr, sr, d2))
	}
}

// The daemon as systemd starts it: its socket made by the service manager
// (systemd-socket-activate, started at the first connection), READY=1,
// STATUS= and WATCHDOG=1 on a NOTIFY_SOCKET the test reads, STOPPING=1 on
// SIGTERM.
func TestDaemonUnderSystemd(t *testing.T) {
	begin(t)
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("SKIP (loud): systemd-socket-activate not installed (apt-get install systemd)")
	}
	dir := worldDir(t)
	sock := filepath.Join(dir, "d.sock")
	notify := filepath.Join(dir, "notify.sock")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := nl.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	log := &plugintest.Buffer{}
	cmd := exec.Command(activate, "-l", sock, "-E", "NOTIFY_SOCKET="+notify, "-E", "WATCHDOG_USEC=200000",
		"-E", "STATE_DIRECTORY="+filepath.Join(dir, "state"), gopmiBin, "daemon")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	waitFor(t, "systemd-socket-activate's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	// The first connection starts the daemon.
	if out := strings.TrimSpace(ask(t, nil, "ps", "-json", "-daemon", sock)); out != "[]" {
		t.Fatalf("gopmi ps on a fresh daemon: %q", out)
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !(seen["READY=1"] && seen["STATUS"] && seen["WATCHDOG=1"]) {
		select {
		case m := <-msgs:
			for _, line := range strings.Split(m, "\n") {
				switch {
				case line == "READY=1", line == "WATCHDOG=1":
					seen[line] = true
				case strings.HasPrefix(line, "STATUS=serving "):
					seen["STATUS"] = true
				}
			}
		case <-deadline:
			t.Fatalf("sd_notify seen %v, want READY=1, STATUS=serving ..., WATCHDOG=1\n%s", seen, log.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopDeadline := time.After(10 * time.Second)
	for stopping := false; !stopping; {
		select {
		case m := <-msgs:
			stopping = strings.Contains(m, "STOPPING=1")
		case <-stopDeadline:
			t.Fatalf("no STOPPING=1 after SIGTERM\n%s", log.String())
		}
	}
	select {
	case <-exited:
		if werr != nil {
			t.Fatalf("the daemon's exit after SIGTERM: %v\n%s", werr, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not exit after SIGTERM")
	}
}

// The units pass systemd-analyze verify, with ExecStart where make
// install puts gopmi (here: the test's build).
func TestDaemonUnitsVerify(t *testing.T) {
	begin(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("SKIP (loud): systemd-analyze not installed (apt-get install systemd)")
	}
	dir := t.TempDir()
	for _, u := range []string{"gopmi.socket", "gopmi.service"} {
		b, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "@BINDIR@", binDir))
		if err := os.WriteFile(filepath.Join(dir, u), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", filepath.Join(dir, "gopmi.socket"), filepath.Join(dir, "gopmi.service")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// gopmi log shows how a run ended (its exit status and the lines it
// printed) and what the daemon noted about the job.
func TestDaemonLog(t *testing.T) {
	begin(t)
	d, _ := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startRun(ctx, daemonArgv(d.sock, "-n", "2", "/bin/false"), nil, nil, "").wait(t, "the failing run")
	if r.ExitCode != 1 {
		t.Fatalf("gopmi run of /bin/false: exit %d\n%s", r.ExitCode, r.Stderr)
	}
	out := ask(t, nil, "log", "-daemon", d.sock)
	for _, want := range []string{" daemon: registered by run ", " run: gopmi run exited with status 1", "exited with status 1\n", " daemon: ended: finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("gopmi log lacks %q:\n%s", want, out)
		}
	}
}

// PMI2_Job_Connect between two separately started runs: the client run
// connects to the serving run's job through the node daemon, reads a key
// its rank 1 put, and disconnects.
func TestDaemonJobConnectAcrossRuns(t *testing.T) {
	begin(t)
	d, _ := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	server := startRun(ctx, daemonArgv(d.sock, "-n", "2", progs[clients.PMI2Test], "xconnect-serve"), nil, nil, "")
	client := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "xconnect-client"), nil, nil, "")
	cr := client.wait(t, "the client run")
	sr := server.wait(t, "the serving run")
	if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(cr.Stdout, "step=xjob-get job=") || !strings.Contains(cr.Stdout, " value=xv-1\n") {
		t.Fatal(twoRuns(cr, sr, d))
	}
}

// A run killed while another run is connected to its job: the peer's next
// connect fails at once (the daemon sees the run's process is gone), not
// after a grace or a time-out.
func TestDaemonConnectedRunKilled(t *testing.T) {
	begin(t)
	d, _ := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	server := startRun(ctx, daemonArgv(d.sock, "-n", "2", progs[clients.PMI2Test], "xconnect-serve"), nil, nil, "")
	client := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "xconnect-hold"), nil, nil, "")
	waitFor(t, "the client's connection", func() bool {
		return strings.Contains(ask(t, nil, "query", "-daemon", d.sock, "gopmi.names"), "gopmi-xjob-connected")
	})
	var jobs []struct {
		PID  int    `json:"pid"`
		Size int    `json:"size"`
		Cmd  string `json:"cmd"`
	}
	if err := json.Unmarshal([]byte(ask(t, nil, "ps", "-json", "-daemon", d.sock)), &jobs); err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, j := range jobs {
		if j.Size == 2 && j.PID > 0 {
			killed = j.PID
			if err := syscall.Kill(j.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if killed == 0 {
		t.Fatalf("the serving run is not in gopmi ps: %+v", jobs)
	}
	start := time.Now()
	cr := client.wait(t, "the client run")
	server.wait(t, "the killed run")
	if cr.ExitCode != 0 || !strings.Contains(cr.Stdout, "step=xjob-gone rc=") || time.Since(start) > 10*time.Second {
		t.Fatalf("after the serving run (pid %d) was killed, %s later: exit %d\n%s\n%s\ndaemon:\n%s", killed, time.Since(start).Round(time.Millisecond),
			cr.ExitCode, cr.Stdout, cr.Stderr, d.log.String())
	}
}

// gopmi query speaks the contract's vocabulary: while a run lives, the
// daemon asks the run's universe about its job (the processes' states
// come from there); once it ended, the daemon answers from its registry,
// in the same format; the 1.0 names still work.
func TestDaemonQueryVocabulary(t *testing.T) {
	begin(t)
	d, _ := testDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	server := startRun(ctx, daemonArgv(d.sock, "-n", "2", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
	var ns string
	waitFor(t, "the serving job in gopmi ps", func() bool {
		var jobs []plugin.JobInfo
		if err := json.Unmarshal([]byte(ask(t, nil, "ps", "-json", "-daemon", d.sock)), &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Size == 2 && j.State == "running" {
				ns = j.Nspace
				return true
			}
		}
		return false
	})
	table := func(key string) []plugin.ProcInfo {
		t.Helper()
		var res map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ask(t, nil, "query", "-json", "-daemon", d.sock, "-nspace", ns, key)), &res); err != nil {
			t.Fatal(err)
		}
		procs, err := plugin.DecodeProcTable(string(res[key]))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return procs
	}
	// Both ranks published and wait for a client: the run's universe
	// knows them connected, with their pids and program.
	waitFor(t, "both ranks connected in the proc table", func() bool {
		procs := table(plugin.QueryProcTable)
		return len(procs) == 2 && procs[0].State == plugin.ProcConnected && procs[1].State == plugin.ProcConnected &&
			procs[0].PID > 0 && strings.HasSuffix(procs[1].App, "pmi2_test")
	})
	if got := table("proc-table"); len(got) != 2 {
		t.Errorf("proc-table by its 1.0 name: %+v", got)
	}
	host, _ := os.Hostname()
	out := ask(t, nil, "query", "-daemon", d.sock, "-nspace", ns, plugin.QueryJobStatus, plugin.QueryLocalPeers, plugin.QueryNodeList)
	for _, want := range []string{plugin.QueryJobStatus + ": running\n", plugin.QueryLocalPeers + ": 0,1\n", plugin.QueryNodeList + ": " + host + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("gopmi query lacks %q:\n%s", want, out)
		}
	}
	client := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
	cr := client.wait(t, "the client run")
	sr := server.wait(t, "the serving run")
	if cr.ExitCode != 0 || sr.ExitCode != 0 {
		t.Fatal(twoRuns(cr, sr, d))
	}
	// The run is gone: the registry answers, in the same format.
	procs := table(plugin.QueryProcTable)
	if len(procs) != 2 || procs[1].Rank != 1 || procs[1].Node == "" || procs[1].PID == 0 {
		t.Errorf("proc table of an ended job: %+v", procs)
	}
	if out := ask(t, nil, "query", "-daemon", d.sock, "-nspace", ns, "job-status"); !strings.Contains(out, "job-status: finished") {
		t.Errorf("job-status of the ended job: %s", out)
	}
}

// A socket is found by its path only: where the daemon's socket lives in
// a directory another user can write first, hers must not be taken for
// the daemon. Root's gopmi ps and gopmi query refuse it, naming her uid;
// root's run neither registers with it nor sends it a name, and runs
// alone (its names within the run) with a line that says why.
func TestDaemonSocketOfAnotherUser(t *testing.T) {
	begin(t)
	cred := namedTestUser(t, "gopmi-it2")
	dir := worldDir(t)
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	bin := copyExec(t, gopmiBin, dir)
	sock := filepath.Join(shared, "d.sock")
	log := &plugintest.Buffer{}
	hers := exec.Command(bin, "daemon", "-socket", sock, "-state", filepath.Join(shared, "state"), "-log-level", "debug")
	hers.Stdout, hers.Stderr = log, log
	hers.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	hers.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := hers.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hers.Process.Kill(); _ = hers.Wait() })
	waitFor(t, "her daemon's socket", func() bool { return daemonIsUp(sock) })

	who := fmt.Sprintf("served by uid %d (gopmi-it2, pid %d), neither you nor root: not used", cred.Uid, hers.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, args := range [][]string{{"ps", "-daemon", sock}, {"query", "-daemon", sock, "gopmi.names"}} {
		r, err := clients.Run(ctx, append([]string{gopmiBin}, args...), clients.RunOptions{})
		if err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, who) {
			t.Errorf("root's gopmi %s against her socket: %v, exit %d; want a refusal with %q: %s", args[0], err, r.ExitCode, who, r.Stderr)
		}
	}
	r := startRun(ctx, daemonArgv(sock, "-n", "2", progs[clients.PMI2Test], "ns"), nil, nil, "").wait(t, "root's run")
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, who) || !strings.Contains(r.Stderr, "names stay within this run") {
		t.Errorf("root's run: exit %d, want 0 and a line that says her socket was not used:\n%s\n%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	// Her daemon heard nothing of root's: no job, no name.
	if ps := askWith(t, bin, cred, "ps", "-json", "-daemon", sock); strings.Contains(ps, "pmi2_test") {
		t.Errorf("root's job reached her daemon: %s", ps)
	}
	if names := askWith(t, bin, cred, "query", "-json", "-daemon", sock, "gopmi.names"); strings.Contains(names, "gopmi-") {
		t.Errorf("root's names reached her daemon: %s", names)
	}
}

// daemonIsUp reports whether something listens on the unix socket sock.
func daemonIsUp(sock string) bool {
	c, err := net.Dial("unix", sock)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// userNameOf is the name of the user uid.
func userNameOf(t *testing.T, uid uint32) string {
	t.Helper()
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// startAs starts argv as the user cred in dir, with env beside PATH and
// HOME, and returns its output; it runs until the test ends, when its
// stdin closes (and it is killed if the test's process dies).
func startAs(t *testing.T, cred *syscall.Credential, dir string, env []string, argv ...string) *plugintest.Buffer {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir}, env...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	out := &plugintest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	return out
}

// serveName starts a run of root's on d that publishes gopmi-xrun and
// waits for the name; finish runs the client that looks it up, which lets
// the serving run end, and checks that both ended well.
func serveName(t *testing.T, ctx context.Context, d *nodeDaemon) (finish func()) {
	t.Helper()
	server := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-serve"), nil, nil, "")
	waitFor(t, "the name", func() bool {
		return strings.Contains(ask(t, nil, "query", "-daemon", d.sock, "gopmi.names"), "gopmi-xrun")
	})
	return func() {
		t.Helper()
		client := startRun(ctx, daemonArgv(d.sock, "-n", "1", progs[clients.PMI2Test], "ns-client"), nil, nil, "")
		if cr := client.wait(t, "the client run"); cr.ExitCode != 0 {
			t.Fatalf("client: %s", cr.Stderr)
		}
		if sr := server.wait(t, "the serving run"); sr.ExitCode != 0 {
			t.Fatalf("server: %s", sr.Stderr)
		}
	}
}
