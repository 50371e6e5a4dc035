package pmiclient

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/wire"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hydra1 answers PMI-1 requests the way mpiexec.hydra 4.0.2 does in the
// captures (rc last, msg=success, no rc on several replies).
func hydra1(m *wire.Message) []byte {
	switch m.Cmd {
	case "initack":
		return []byte("cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n")
	case "init":
		return line("response_to_init", "pmi_version", "1", "pmi_subversion", "2", "rc", "0")
	case "get_maxes":
		return line("maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")
	case "get_appnum":
		return line("appnum", "appnum", "0")
	case "get_universe_size":
		return line("universe_size", "size", "-1")
	case "get_my_kvsname":
		return line("my_kvsname", "kvsname", "kvs_1_0")
	case "put":
		return line("put_result", "rc", "0", "msg", "success")
	case "get":
		if m.Value("key") == "missing" {
			return line("get_result", "rc", "1", "msg", "key missing not found")
		}
		return line("get_result", "rc", "0", "msg", "success", "value", "val of "+m.Value("key"))
	case "barrier_in":
		if g, ok := m.Get("group"); ok {
			grp, err := pmi1.ParseGroup(g)
			if err != nil {
				return line("barrier_out", "rc", "3", "msg", err.Error())
			}
			return line("barrier_out", "tag", strconv.Itoa(grp.Tag), "rc", "0")
		}
		return line("barrier_out")
	case "publish_name":
		return line("publish_result", "info", "ok", "rc", "0", "msg", "success")
	case "lookup_name":
		if m.Value("service") == "nope" {
			return line("lookup_result", "rc", "1", "msg", "service_not_found")
		}
		return line("lookup_result", "port", "port-of-"+m.Value("service"), "info", "ok", "rc", "0", "msg", "success")
	case "unpublish_name":
		return line("unpublish_result", "info", "ok", "rc", "0", "msg", "success")
	case "spawn":
		if m.Value("spawnssofar") == m.Value("totspawns") {
			return line("spawn_result", "rc", "0", "jobid", "kvs_2_0", "errcodes", "0,0,0")
		}
		return nil
	case "finalize":
		return line("finalize_ack")
	}
	return line(pmi1.ReplyName(m.Cmd), "rc", "-1", "msg", "unknown command")
}

func TestClientSession(t *testing.T) {
	ctx := ctxT(t)
	conn, srv := startFake(t, hydra1)
	c := New(conn)

	rank, size, debug, err := c.Initack(ctx, 1)
	if err != nil || rank != 1 || size != 2 || debug != 0 {
		t.Fatalf("Initack = %d %d %d %v", rank, size, debug, err)
	}
	v, err := c.Init(ctx)
	if err != nil || v != (Version{1, 2}) {
		t.Fatalf("Init = %+v %v", v, err)
	}
	mx, err := c.GetMaxes(ctx)
	if err != nil || mx != (Maxes{256, 64, 1024}) {
		t.Fatalf("GetMaxes = %+v %v", mx, err)
	}
	if n, err := c.GetAppnum(ctx); err != nil || n != 0 {
		t.Fatalf("GetAppnum = %d %v", n, err)
	}
	if n, err := c.GetUniverseSize(ctx); err != nil || n != -1 {
		t.Fatalf("GetUniverseSize = %d %v", n, err)
	}
	kvs, err := c.KVSName(ctx)
	if err != nil || kvs != "kvs_1_0" {
		t.Fatalf("KVSName = %q %v", kvs, err)
	}
	if err := c.Put(ctx, kvs, "k", "v v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := c.Get(ctx, kvs, "k"); err != nil || got != "val of k" {
		t.Fatalf("Get = %q %v", got, err)
	}
	_, err = c.Get(ctx, "", "missing")
	var pe *Error
	if !errors.As(err, &pe) || pe.Rc != 1 || pe.Msg != "key missing not found" || pe.Cmd != "get" {
		t.Fatalf("Get(missing) err = %#v", err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	r, err := c.BarrierGroup(ctx, pmi1.Group{Kind: pmi1.GroupRanks, Ranks: []int{0, 1}, Tag: 77})
	if err != nil || r.Value("tag") != "77" {
		t.Fatalf("BarrierGroup = %+v %v", r, err)
	}
	if err := c.Publish(ctx, "svc", "p#1"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if p, err := c.Lookup(ctx, "svc"); err != nil || p != "port-of-svc" {
		t.Fatalf("Lookup = %q %v", p, err)
	}
	if _, err := c.Lookup(ctx, "nope"); !errors.As(err, &pe) || pe.Msg != "service_not_found" {
		t.Fatalf("Lookup(nope) err = %v", err)
	}
	if err := c.Unpublish(ctx, "svc"); err != nil {
		t.Fatalf("Unpublish: %v", err)
	}
	res, err := c.Spawn(ctx, &wire.Spawn{
		Cmds:   []wire.SpawnCmd{{Cmd: "./a", Args: []string{"x"}, MaxProcs: 2}, {Cmd: "./b", MaxProcs: 1}},
		Preput: []wire.Arg{{Key: "PARENT_ROOT_PORT_NAME", Value: "p"}},
	})
	if err != nil || res.JobID != "kvs_2_0" || !cmp.Equal(res.Errcodes, []int{0, 0, 0}) {
		t.Fatalf("Spawn = %+v %v", res, err)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	if err := c.Abort(ctx, 7, "rank 1 gave up"); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	c.Close()

	want := []string{
		"cmd=initack pmiid=1",
		"cmd=init pmi_version=1 pmi_subversion=1",
		"cmd=get_maxes", "cmd=get_appnum", "cmd=get_universe_size", "cmd=get_my_kvsname",
		"cmd=put kvsname=kvs_1_0 key=k value=v v",
		"cmd=get kvsname=kvs_1_0 key=k",
		"cmd=get key=missing",
		"cmd=barrier_in",
		"cmd=barrier_in group=0,1:77",
		"cmd=publish_name service=svc port=p#1",
		"cmd=lookup_name service=svc", "cmd=lookup_name service=nope",
		"cmd=unpublish_name service=svc",
		"mcmd=spawn\nnprocs=2\nexecname=./a\ntotspawns=2\nspawnssofar=1\nargcnt=1\narg1=x\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=p\ninfo_num=0\nendcmd",
		"mcmd=spawn\nnprocs=1\nexecname=./b\ntotspawns=2\nspawnssofar=2\nargcnt=0\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=p\ninfo_num=0\nendcmd",
		"cmd=finalize",
		"cmd=abort exitcode=7 message=rank 1 gave up",
	}
	// net.Pipe does not buffer: every write returned after the server read
	// it, and the server ends once it reads the close.
	select {
	case <-srv.done:
	case <-ctx.Done():
		t.Fatal("server did not stop")
	}
	if diff := cmp.Diff(want, srv.frames()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
