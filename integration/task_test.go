package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/integration/internal/pmiclient"
)

// The test binary doubles as a task: `gopmi run -n N <test binary> <role>
// [k=v...]` with taskEnv set starts it in taskMain instead of the tests.
// A task prints one "task pid=P rank=R" line first, then lines the tests
// read ("barrier-error rank=R err=...", "wire step=... rc=..."), and bounds
// every wait by GOPMI_TEST_ALARM (set by clients.Run).
const (
	taskEnv = "GOPMI_ITEST_TASK"
	// sockEnv names a unix socket the task dials to say it is about to
	// block, so a test can act while the job waits (see hold).
	sockEnv = "GOPMI_ITEST_SOCK"
)

// taskRun is the environment entry that makes gopmi's tasks run taskMain.
var taskRun = taskEnv + "=1"

// taskArgs is the program part of a gopmi run command line for a role.
func taskArgs(role string, params ...string) []string {
	return append([]string{selfBin, role}, params...)
}

// taskMain runs one role and returns the exit status.
func taskMain(args []string) int {
	if len(args) == 0 {
		fmt.Println("fail task reason=no-role")
		return 2
	}
	// Leave gopmi run's process group: clients.Run kills that group when
	// gopmi exits, which would hide a task gopmi failed to end; the tests
	// check these pids themselves.
	_ = syscall.Setpgid(0, 0)
	role, params := args[0], map[string]string{}
	for _, a := range args[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			params[k] = v
		}
	}
	secs, _ := strconv.Atoi(os.Getenv("GOPMI_TEST_ALARM"))
	if secs <= 0 {
		secs = 60
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	env, err := pmiclient.EnvFrom(os.Getenv)
	if err != nil {
		fmt.Printf("fail task reason=%q\n", err.Error())
		return 2
	}
	fmt.Printf("task pid=%d rank=%d role=%s\n", os.Getpid(), env.Rank, role)
	t := &task{ctx: ctx, env: env, params: params}
	roles := map[string]func() int{
		"nofinalize":     t.noFinalize,
		"sigkill":        t.sigkill,
		"hold":           t.hold,
		"wire1":          t.wire1,
		"wire2":          t.wire2,
		"wire1-midclose": t.wire1MidClose,
		"wire2-midclose": t.wire2MidClose,
		"wire2-badlen":   t.wire2BadLength,
		"bigval":         t.bigValue,
		"peek":           t.peek,
	}
	f, ok := roles[role]
	if !ok {
		fmt.Printf("fail task reason=unknown-role-%s\n", role)
		return 2
	}
	return f()
}

type task struct {
	ctx    context.Context
	env    pmiclient.Env
	params map[string]string
}

// victim is the rank the failing roles single out: rank 1, or rank 0 in a
// job of one.
func (t *task) victim() int { return 1 % t.env.Size }

func (t *task) failf(format string, args ...any) int {
	fmt.Printf("fail task rank=%d reason=%q\n", t.env.Rank, fmt.Sprintf(format, args...))
	return 1
}

// init1 connects and runs PMI-1 init.
func (t *task) init1() (*pmiclient.Client, error) {
	c, err := pmiclient.Dial(t.ctx, t.env)
	if err != nil {
		return nil, err
	}
	if _, err := c.Init(t.ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// init2 connects and runs PMI-2 init (the init line and fullinit).
func (t *task) init2() (*pmiclient.Client2, error) {
	c, err := pmiclient.Dial2(t.ctx, t.env)
	if err != nil {
		return nil, err
	}
	if _, err := c.Init(t.ctx, pmiclient.FullInit{Rank: pmiclient.Int(t.env.Rank)}); err != nil {
		return nil, err
	}
	return c, nil
}

// barrierThenFinalize is what the bystanders of a failing rank do: a
// barrier the victim never joins. Its error is the expected outcome
// (exit 1, as an MPI program would); completing it is a bug.
func (t *task) barrierThenFinalize(c *pmiclient.Client) int {
	if err := c.Barrier(t.ctx); err != nil {
		fmt.Printf("barrier-error rank=%d err=%q\n", t.env.Rank, err.Error())
		return 1
	}
	fmt.Printf("barrier-completed rank=%d\n", t.env.Rank)
	if err := c.Finalize(t.ctx); err != nil {
		return t.failf("finalize: %v", err)
	}
	return 0
}

// noFinalize: the victim inits and exits 0 without finalize.
func (t *task) noFinalize() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	if t.env.Rank == t.victim() {
		fmt.Printf("exiting-without-finalize rank=%d\n", t.env.Rank)
		return 0
	}
	return t.barrierThenFinalize(c)
}

// sigkill: the victim inits and SIGKILLs itself.
func (t *task) sigkill() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	if t.env.Rank == t.victim() {
		fmt.Printf("killing-myself rank=%d\n", t.env.Rank)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		// Delivery may lag Kill's return in a multi-threaded process.
		<-t.ctx.Done()
		return t.failf("still alive after SIGKILL")
	}
	return t.barrierThenFinalize(c)
}

// hold: every rank inits, puts and publishes a name; the last rank never
// joins the barrier and waits on its connection instead, so the
// barrier stays open. With sockEnv set each rank reports on that socket
// just before it blocks.
func (t *task) hold() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	kvs, err := c.KVSName(t.ctx)
	if err != nil {
		return t.failf("kvsname: %v", err)
	}
	if err := c.Put(t.ctx, kvs, "k"+strconv.Itoa(t.env.Rank), "v"); err != nil {
		return t.failf("put: %v", err)
	}
	// A publish goes to the backend (a fence on one node does not), so
	// once it is answered this node's backend is up and serving.
	svc := fmt.Sprintf("hold-%s-%d", kvs, t.env.Rank)
	if err := c.Publish(t.ctx, svc, "port"); err != nil {
		return t.failf("publish: %v", err)
	}
	if err := t.report(); err != nil {
		return t.failf("report to the test: %v", err)
	}
	if t.env.Rank == t.env.Size-1 {
		fmt.Printf("holding rank=%d\n", t.env.Rank)
		// Nothing is owed to this rank; the read ends when gopmi ends the
		// job (SIGTERM, or the connection closing) or at the deadline.
		m, err := c.Recv(t.ctx)
		if err == nil {
			return t.failf("unexpected message while holding: %s", m.Cmd)
		}
		fmt.Printf("hold-ended rank=%d err=%q\n", t.env.Rank, err.Error())
		return 1
	}
	return t.barrierThenFinalize(c)
}

// report tells the test listening on sockEnv that this rank is ready.
func (t *task) report() error {
	path := os.Getenv(sockEnv)
	if path == "" {
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(t.ctx, "unix", path)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "ready rank=%d pid=%d\n", t.env.Rank, os.Getpid())
	return err
}

// rawConn is the byte-level side of both PMI clients.
type rawConn interface {
	SendRaw(ctx context.Context, b []byte) error
	Recv(ctx context.Context) (*wire.Message, error)
	Close() error
}

// wireStep is one malformed request and the reply it gets.
type wireStep struct {
	name string
	raw  []byte
}

// exchange writes raw bytes and prints the one reply they get; the test
// wants rc != 0 and a message for every step.
func exchange(ctx context.Context, rank int, s wireStep, c rawConn) error {
	if err := c.SendRaw(ctx, s.raw); err != nil {
		return fmt.Errorf("step %s: %w", s.name, err)
	}
	m, err := c.Recv(ctx)
	if err != nil {
		return fmt.Errorf("step %s: %w", s.name, err)
	}
	msg := m.Value("msg")
	if msg == "" {
		msg = m.Value("errmsg")
	}
	rc, ok := m.Get("rc")
	if !ok {
		rc = "none"
	}
	fmt.Printf("wire rank=%d step=%s reply=%s rc=%s msg=%q\n", rank, s.name, m.Cmd, rc, msg)
	return nil
}

// wire1 sends malformed PMI-1 requests after init, one at a time, and then
// proves the connection still works with a put, barrier, get and finalize.
func (t *task) wire1() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	kvs, err := c.KVSName(t.ctx)
	if err != nil {
		return t.failf("kvsname: %v", err)
	}
	line := func(s string) []byte { return []byte(s + "\n") }
	steps := []wireStep{
		{"unknown-command", line("cmd=frobnicate foo=bar")},
		{"missing-value", line("cmd=put kvsname=" + kvs + " key=k")},
		{"missing-key", line("cmd=get kvsname=" + kvs)},
		{"duplicated-key", line("cmd=put kvsname=" + kvs + " key=a key=b value=v")},
		{"oversized-key", line("cmd=put kvsname=" + kvs + " key=" + strings.Repeat("k", 300) + " value=v")},
		{"oversized-value", line("cmd=put kvsname=" + kvs + " key=big value=" + strings.Repeat("v", 2000))},
		{"oversized-line", line("cmd=put kvsname=" + kvs + " key=huge value=" + strings.Repeat("x", 1<<20+4096))},
		{"garbled-no-cmd", line("hello world")},
		{"garbled-token", line("cmd=get kvsname=" + kvs + " key")},
		{"wrong-kvsname", line("cmd=get kvsname=no-such-kvs key=k")},
	}
	for _, s := range steps {
		if err := exchange(t.ctx, t.env.Rank, s, c); err != nil {
			return t.failf("%v", err)
		}
	}
	key := "still-" + strconv.Itoa(t.env.Rank)
	if err := c.Put(t.ctx, kvs, key, "usable value"); err != nil {
		return t.failf("put after the bad input: %v", err)
	}
	if err := c.Barrier(t.ctx); err != nil {
		return t.failf("barrier after the bad input: %v", err)
	}
	got, err := c.Get(t.ctx, kvs, key)
	if err != nil || got != "usable value" {
		return t.failf("get after the bad input: %q, %v", got, err)
	}
	if err := c.Finalize(t.ctx); err != nil {
		return t.failf("finalize: %v", err)
	}
	fmt.Printf("wire rank=%d still-usable\n", t.env.Rank)
	return 0
}

// frame2 is a PMI-2 frame: the 6-byte left-aligned length, then body.
func frame2(body string) []byte {
	return fmt.Appendf(nil, "%-6d%s", len(body), body)
}

// wire2 is wire1 for PMI-2.
func (t *task) wire2() int {
	c, err := t.init2()
	if err != nil {
		return t.failf("init: %v", err)
	}
	steps := []wireStep{
		{"unknown-command", frame2("cmd=frobnicate;foo=bar;")},
		{"missing-value", frame2("cmd=kvs-put;key=k;")},
		{"missing-key", frame2("cmd=kvs-get;")},
		{"duplicated-key", frame2("cmd=kvs-put;key=a;key=b;value=v;")},
		{"oversized-key", frame2("cmd=kvs-put;key=" + strings.Repeat("k", 300) + ";value=v;")},
		{"oversized-value", frame2("cmd=kvs-put;key=big;value=" + strings.Repeat("v", 2000) + ";")},
		{"garbled-no-cmd", frame2("hello=world;")},
		{"garbled-body", frame2("garbage without structure")},
	}
	for _, s := range steps {
		if err := exchange(t.ctx, t.env.Rank, s, c); err != nil {
			return t.failf("%v", err)
		}
	}
	key := "still-" + strconv.Itoa(t.env.Rank)
	if err := c.KVSPut(t.ctx, key, "usable;value"); err != nil {
		return t.failf("put after the bad input: %v", err)
	}
	if err := c.KVSFence(t.ctx); err != nil {
		return t.failf("fence after the bad input: %v", err)
	}
	got, err := c.KVSGet(t.ctx, "", -1, key)
	if err != nil || got != "usable;value" {
		return t.failf("get after the bad input: %q, %v", got, err)
	}
	if err := c.Finalize(t.ctx); err != nil {
		return t.failf("finalize: %v", err)
	}
	fmt.Printf("wire rank=%d still-usable\n", t.env.Rank)
	return 0
}

// closeMidMessage writes the start of a request, closes the connection
// and exits 0, as a task that crashes while writing would.
func (t *task) closeMidMessage(c rawConn, partial []byte) int {
	if err := c.SendRaw(t.ctx, partial); err != nil {
		return t.failf("send the partial request: %v", err)
	}
	if err := c.Close(); err != nil {
		return t.failf("close: %v", err)
	}
	fmt.Printf("closed-mid-message rank=%d\n", t.env.Rank)
	return 0
}

func (t *task) wire1MidClose() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	return t.closeMidMessage(c, []byte("cmd=put kvsname=x key=k value=cut-he"))
}

func (t *task) wire2MidClose() int {
	c, err := t.init2()
	if err != nil {
		return t.failf("init: %v", err)
	}
	return t.closeMidMessage(c, []byte("60    cmd=kvs-put;key=k;val"))
}

// wire2BadLength sends a PMI-2 frame whose length prefix is not a number:
// the server cannot find the next frame, so it must answer with an error
// and close the connection.
func (t *task) wire2BadLength() int {
	c, err := t.init2()
	if err != nil {
		return t.failf("init: %v", err)
	}
	if err := exchange(t.ctx, t.env.Rank, wireStep{"bad-length", []byte("abcdefcmd=kvs-fence;")}, c); err != nil {
		return t.failf("%v", err)
	}
	m, err := c.Recv(t.ctx)
	switch {
	case err == nil:
		return t.failf("connection still open after a bad length: got %s", m.Cmd)
	case errors.Is(err, io.EOF):
		fmt.Printf("wire rank=%d step=after-bad-length closed=true\n", t.env.Rank)
	default:
		return t.failf("after a bad length, want EOF, got %v", err)
	}
	return 0
}

// bigValue: every rank puts a value of len= bytes (PMI-2), fences and
// reads its right neighbour's. A refused put is printed, not fatal: the
// task then finalizes and exits 0.
func (t *task) bigValue() int {
	n, err := strconv.Atoi(t.params["len"])
	if err != nil || n < 1 {
		return t.failf("bad len=%q", t.params["len"])
	}
	c, err := t.init2()
	if err != nil {
		return t.failf("init: %v", err)
	}
	value := func(r int) string {
		head := fmt.Sprintf("<%d>", r)
		return head + strings.Repeat(string(rune('a'+r%26)), max(n-len(head), 0))
	}
	if err := c.KVSPut(t.ctx, "big-"+strconv.Itoa(t.env.Rank), value(t.env.Rank)); err != nil {
		fmt.Printf("bigval-put-error rank=%d len=%d err=%q\n", t.env.Rank, n, err.Error())
		if err := c.Finalize(t.ctx); err != nil {
			return t.failf("finalize: %v", err)
		}
		return 0
	}
	if err := c.KVSFence(t.ctx); err != nil {
		return t.failf("fence: %v", err)
	}
	peer := (t.env.Rank + 1) % t.env.Size
	got, err := c.KVSGet(t.ctx, "", -1, "big-"+strconv.Itoa(peer))
	if err != nil {
		return t.failf("get big-%d: %v", peer, err)
	}
	if got != value(peer) {
		return t.failf("get big-%d: %d bytes, not the %d put", peer, len(got), n)
	}
	if err := c.Finalize(t.ctx); err != nil {
		return t.failf("finalize: %v", err)
	}
	fmt.Printf("bigval rank=%d len=%d peer=%d ok\n", t.env.Rank, len(got), peer)
	return 0
}

// peek looks up each of the comma-separated names= on the PMI-1 wire and
// prints each reply whole ("wire ... step=<name> ... msg=..."): what a
// lookup tells a user about a name, published or not.
func (t *task) peek() int {
	c, err := t.init1()
	if err != nil {
		return t.failf("init: %v", err)
	}
	for _, name := range strings.Split(t.params["names"], ",") {
		if err := exchange(t.ctx, t.env.Rank, wireStep{name, []byte("cmd=lookup_name service=" + name + "\n")}, c); err != nil {
			return t.failf("%v", err)
		}
	}
	if err := c.Finalize(t.ctx); err != nil {
		return t.failf("finalize: %v", err)
	}
	return 0
}
