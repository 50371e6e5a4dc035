package integration

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// portClient is a PMI client in bash over /dev/tcp, run as the test
// chooses (another user, or the job's user outside the job):
//
//	portclient.sh HOST:PORT pmi1 ID              initack's first line
//	portclient.sh HOST:PORT pmi2 RANK none|wrong|SECRET [finalize]
//
// It prints each reply it reads on its own line.
const portClient = `#!/bin/bash
set -u
addr=$1 mode=$2 id=$3
exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}" || exit 2
send2() { printf '%-6d%s' "${#1}" "$1" >&3; }
recv2() {
	local len body
	IFS= read -r -N 6 len <&3 || return 1
	len=${len// /}
	IFS= read -r -N "$len" body <&3 || return 1
	printf '%s\n' "$body"
	REPLY=$body
}
if [ "$mode" = pmi1 ]; then
	printf 'cmd=initack pmiid=%s\n' "$id" >&3
	IFS= read -r line <&3 && printf '%s\n' "$line"
	exit 0
fi
auth=$4
printf 'cmd=init pmi_version=2 pmi_subversion=0\n' >&3
IFS= read -r line <&3 && printf '%s\n' "$line"
if [ "$auth" = none ]; then
	send2 "cmd=fullinit;pmirank=$id;"
	recv2
	exit 0
fi
send2 "cmd=fullinit;pmirank=$id;authtype=challenge-sha256;"
recv2 || exit 0
n=${REPLY#*authinfo=}; n=${n%%;*}
secret=$auth; [ "$auth" = wrong ] && secret=not-the-secret
answer=$(printf '%s%s' "$secret" "$n" | sha256sum | cut -c1-64)
send2 "cmd=auth-response-complete;authinfo=$answer;"
recv2 || exit 0
if [ "${5:-}" = finalize ]; then
	send2 "cmd=finalize;"
	recv2
fi
exit 0
`

// portTask is each rank of the job: rank 0 says where the port is and,
// once the test says go, runs MPICH's PMI-1 handshake for itself over the
// same client; rank 1 leaves its PMI_ID to the authenticated stranger.
const portTask = `d=$1
if [ "$PMI_ID" = 0 ]; then
	echo "$PMI_PORT $PMI_AUTH_SECRET" > "$d/port.tmp" && mv "$d/port.tmp" "$d/port"
fi
while [ ! -e "$d/go" ]; do sleep 0.05; done
[ "$PMI_ID" = 0 ] || exit 0
exec 3<>"/dev/tcp/${PMI_PORT%:*}/${PMI_PORT##*:}"
printf 'cmd=init pmi_version=1 pmi_subversion=1\n' >&3; IFS= read -r a <&3
printf 'cmd=initack pmiid=0\n' >&3; IFS= read -r b <&3
case "$b" in *rc=0*) ;; *) echo "rank 0 refused: $b"; exit 1;; esac
for i in 1 2 3; do IFS= read -r x <&3; done
printf 'cmd=finalize\n' >&3; IFS= read -r c <&3
echo "rank 0: $c"
`

// TestPMIPortAccess: PMI_PORT is for the job's own tasks. A process of
// another user may not claim a PMI_ID with PMI-1, nor with PMI-2 unless it
// answers the challenge-sha256 handshake with the tasks' PMI_AUTH_SECRET;
// then it is served. A PMI_ID is claimed once, whoever asks again. The
// real task still gets its rank, and the job ends well.
func TestPMIPortAccess(t *testing.T) {
	begin(t)
	stranger := testUser(t)
	// The other user runs the client from here: t.TempDir's parent is
	// private.
	dir := worldDir(t)
	client := filepath.Join(dir, "portclient.sh")
	if err := os.WriteFile(client, []byte(portClient), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := startRun(ctx, gopmiArgv("-pmi-port", "-n", "2", "-timeout", "60s", "bash", "-c", portTask, "task", dir), nil, nil, "")
	var port, secret string
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, err := os.ReadFile(filepath.Join(dir, "port"))
		if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
			port, secret = f[0], f[1]
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the job never wrote its PMI_PORT:\n%s", output(job.wait(t, "the job")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(secret) < 32 {
		t.Fatalf("PMI_AUTH_SECRET %q: want at least 128 bits", secret)
	}
	as := func(cred *syscall.Credential, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", append([]string{client, port}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("portclient %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	uid := "uid_" + strconv.Itoa(int(stranger.Uid))
	for _, c := range []struct {
		what string
		args []string
		want []string
	}{
		{"PMI-1 initack", []string{"pmi1", "0"}, []string{"cmd=initack rc=-1", uid, "not_from_a_process_of_the_job's_user"}},
		{"PMI-2 without authentication", []string{"pmi2", "1", "none"}, []string{"cmd=fullinit-response;rc=-1;", "uid " + strconv.Itoa(int(stranger.Uid)), "authtype=challenge-sha256"}},
		{"PMI-2 with a wrong answer", []string{"pmi2", "1", "wrong"}, []string{"cmd=auth-response;authinfo=", "cmd=fullinit-response;rc=-1;", "authentication failed"}},
		{"PMI-2 with the secret", []string{"pmi2", "1", secret, "finalize"}, []string{"cmd=fullinit-response;rc=0;", "rank=1;", "size=2;", "cmd=finalize-response;rc=0;"}},
	} {
		out := as(stranger, c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s as another user: no %q in\n%s", c.what, w, out)
			}
		}
	}
	// The job's user, from outside the job: rank 1 is taken.
	if out := as(nil, "pmi1", "1"); !strings.HasPrefix(out, "cmd=initack rc=") || strings.HasPrefix(out, "cmd=initack rc=0") || !strings.Contains(out, "already_claimed") {
		t.Errorf("a second claim of PMI_ID 1: %s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := job.wait(t, "the job")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "rank 0: cmd=finalize_ack") {
		t.Fatalf("the job: exit %d\n%s", r.ExitCode, output(r))
	}
	for _, w := range []string{"PMI connection refused", "uid " + strconv.Itoa(int(stranger.Uid)), "a second connection claimed a rank"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the job's log has no %q:\n%s", w, r.Stderr)
		}
	}
}

// portHolder, run as another user, opens N connections to HOST:PORT, says
// how many it opened, and then how many the server closed within S
// seconds, each with when: portholder.py HOST:PORT N S.
const portHolder = `import select, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, wait = int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    try:
        socks.append(socket.create_connection((host, int(port)), timeout=2))
    except OSError:
        pass
start = time.time()
print("opened", len(socks), flush=True)
open_ = set(socks)
late = 0
while open_ and time.time() < start + wait:
    ready, _, _ = select.select(list(open_), [], [], 0.1)
    for s in ready:
        try:
            gone = s.recv(1) == b""
        except OSError:
            gone = True
        if gone:
            open_.discard(s)
            if time.time() - start > 1:
                late += 1
print("closed", len(socks) - len(open_), "late", late, flush=True)
`

// portBothRanks is each rank of the job: rank 0 says where the port is;
// once the test says go, each rank runs MPICH's PMI-1 handshake and
// finalize over PMI_PORT, and then waits for done.
const portBothRanks = `d=$1
if [ "$PMI_ID" = 0 ]; then
	echo "$PMI_PORT" > "$d/port.tmp" && mv "$d/port.tmp" "$d/port"
fi
while [ ! -e "$d/go" ]; do sleep 0.05; done
exec 3<>"/dev/tcp/${PMI_PORT%:*}/${PMI_PORT##*:}"
printf 'cmd=init pmi_version=1 pmi_subversion=1\n' >&3; IFS= read -r a <&3
printf 'cmd=initack pmiid=%s\n' "$PMI_ID" >&3; IFS= read -r b <&3
case "$b" in *rc=0*) ;; *) echo "rank $PMI_ID refused: $b"; exit 1;; esac
for i in 1 2 3; do IFS= read -r x <&3; done
printf 'cmd=finalize\n' >&3; IFS= read -r c <&3
echo "rank $PMI_ID: $c"
while [ ! -e "$d/done" ]; do sleep 0.05; done
`

// TestPMIPortHeldByAnotherUser: another user's idle connections, opened
// as the PMI_PORT listener appears and more than the job has places for,
// take none of its own tasks' places: both ranks connect and the job ends
// well. Hers are closed, the extra ones at once and the rest once they
// claimed no rank within 5 s, and the log names her uid, a few lines a
// second at most. Before, 16 such connections made every rank die of
// SIGPIPE, refused as "too many open connections".
func TestPMIPortHeldByAnotherUser(t *testing.T) {
	begin(t)
	stranger := testUser(t)
	dir := worldDir(t)
	holder := filepath.Join(dir, "portholder.py")
	if err := os.WriteFile(holder, []byte(portHolder), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := startRun(ctx, gopmiArgv("-pmi-port", "-n", "2", "-timeout", "60s", "bash", "-c", portBothRanks, "task", dir), nil, nil, "")
	var port string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "port")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			port = strings.TrimSpace(string(b))
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the job never wrote its PMI_PORT:\n%s", output(job.wait(t, "the job")))
		}
	}
	hold := exec.CommandContext(ctx, "/usr/bin/python3", holder, port, "40", "9")
	hold.SysProcAttr = &syscall.SysProcAttr{Credential: stranger}
	out, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	hold.Stderr = os.Stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "opened 40" {
		t.Fatalf("her connections: %q", lines.Text())
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lines.Scan()
	closed := lines.Text()
	_ = hold.Wait()
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := job.wait(t, "the job")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "rank 0: cmd=finalize_ack") || !strings.Contains(r.Stdout, "rank 1: cmd=finalize_ack") {
		t.Errorf("the job, beside her idle connections: exit %d\n%s", r.ExitCode, output(r))
	}
	// 8 wait for a claim (5 s), 32 are refused at once.
	if closed != "closed 40 late 8" {
		t.Errorf("her connections: %q, want all 40 closed, 8 of them after their wait", closed)
	}
	uid := "uid " + strconv.Itoa(int(stranger.Uid))
	if n := strings.Count(r.Stderr, "pmi_port: connection refused"); n == 0 || n > 10 || !strings.Contains(r.Stderr, uid) {
		t.Errorf("the job's log: %d refusal lines (want 1-10, naming %s):\n%s", n, uid, r.Stderr)
	}
}
