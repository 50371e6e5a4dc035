package pmiclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// right writes a PMI-2 reply with Hydra's right-aligned prefix.
func right(cmd string, kv ...string) []byte {
	b := pmi2.Encode(wire.New(cmd, kv...))
	return append([]byte(fmt.Sprintf("%6d", len(b)-pmi2.HeaderLen)), b[pmi2.HeaderLen:]...)
}

// server2 answers like a mix of Slurm (left-aligned, rc first) and Hydra
// (right-aligned, rc last), and pipelines the init reply with nothing
// else so the client must switch framing cleanly.
func server2(m *wire.Message) []byte {
	switch m.Cmd {
	case "init":
		return line("response_to_init", "rc", "0", "pmi_version", "2", "pmi_subversion", "0")
	case "fullinit":
		return frame2("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", m.Value("pmirank"),
			"size", "4", "appnum", "-1", "debugged", "FALSE", "pmiverbose", "TRUE", "spawner-jobid", "7.0")
	case "job-getid":
		return right("job-getid-response", "jobid", "8.0", "rc", "0")
	case "job-connect":
		return frame2("job-connect-response", "rc", "0", "kvscopy", "FALSE")
	case "job-disconnect":
		return frame2("job-disconnect-response", "rc", "0")
	case "kvs-put", "kvs-fence", "info-putnodeattr", "name-publish", "name-unpublish":
		return frame2(pmi2.ReplyName(m.Cmd), "rc", "0")
	case "kvs-get", "info-getnodeattr", "info-getjobattr":
		if strings.HasPrefix(m.Value("key"), "no-") {
			return frame2(pmi2.ReplyName(m.Cmd), "rc", "0", "found", "FALSE")
		}
		return right(pmi2.ReplyName(m.Cmd), "found", "TRUE", "value", "v;"+m.Value("key"), "rc", "0")
	case "name-lookup":
		switch m.Value("name") {
		case "slurm":
			return frame2("name-lookup-response", "rc", "0", "value", "port-from-value")
		case "gone":
			return frame2("name-lookup-response", "rc", "1", "errmsg", "service_gone_not_found")
		}
		return right("name-lookup-response", "port", "port-of-"+m.Value("name"), "found", "TRUE", "rc", "0")
	case "spawn":
		return frame2("spawn-response", "rc", "0", "jobid", "8.0-1")
	case "ring":
		return frame2("ring-response", "rc", "0", "ring-count", "3", "ring-left", "L", "ring-right", "R")
	case "finalize":
		return frame2("finalize-response", "rc", "0")
	}
	return frame2(pmi2.ReplyName(m.Cmd), "rc", "-1", "errmsg", "unknown")
}

func TestClient2Session(t *testing.T) {
	ctx := ctxT(t)
	conn, srv := startFake(t, server2)
	c := New2(conn)

	info, err := c.Init(ctx, FullInit{Rank: Int(2)})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	want := InitInfo{Version: 2, Rank: 2, Size: 4, Appnum: -1, SpawnerJobID: "7.0", Spawned: true, Verbose: true}
	info.Reply = nil
	if diff := cmp.Diff(want, *info); diff != "" {
		t.Errorf("InitInfo (-want +got):\n%s", diff)
	}
	if id, err := c.JobGetID(ctx); err != nil || id != "8.0" {
		t.Fatalf("JobGetID = %q %v", id, err)
	}
	if kc, err := c.JobConnect(ctx, "9.0"); err != nil || kc {
		t.Fatalf("JobConnect = %v %v", kc, err)
	}
	if err := c.JobDisconnect(ctx, "9.0"); err != nil {
		t.Fatalf("JobDisconnect: %v", err)
	}
	if err := c.KVSPut(ctx, "k", "a;b"); err != nil {
		t.Fatalf("KVSPut: %v", err)
	}
	if err := c.KVSFence(ctx); err != nil {
		t.Fatalf("KVSFence: %v", err)
	}
	if v, err := c.KVSGet(ctx, "8.0", 1, "k"); err != nil || v != "v;k" {
		t.Fatalf("KVSGet = %q %v", v, err)
	}
	if _, err := c.KVSGet(ctx, "", -1, "no-such-key"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("KVSGet(missing) err = %v", err)
	}
	if err := c.PutNodeAttr(ctx, "na", "x"); err != nil {
		t.Fatalf("PutNodeAttr: %v", err)
	}
	if v, err := c.GetNodeAttr(ctx, "na", true); err != nil || v != "v;na" {
		t.Fatalf("GetNodeAttr = %q %v", v, err)
	}
	if _, err := c.GetNodeAttr(ctx, "no-na", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetNodeAttr(missing) err = %v", err)
	}
	if v, err := c.GetJobAttr(ctx, "PMI_process_mapping"); err != nil || v != "v;PMI_process_mapping" {
		t.Fatalf("GetJobAttr = %q %v", v, err)
	}
	if err := c.NamePublish(ctx, "svc", "p#1", wire.Arg{Key: "k", Value: "v"}); err != nil {
		t.Fatalf("NamePublish: %v", err)
	}
	if p, err := c.NameLookup(ctx, "svc"); err != nil || p != "port-of-svc" {
		t.Fatalf("NameLookup = %q %v", p, err)
	}
	if p, err := c.NameLookup(ctx, "slurm"); err != nil || p != "port-from-value" {
		t.Fatalf("NameLookup(slurm) = %q %v", p, err)
	}
	var pe *Error
	if _, err := c.NameLookup(ctx, "gone"); !errors.As(err, &pe) || pe.Rc != 1 || pe.Msg != "service_gone_not_found" {
		t.Fatalf("NameLookup(gone) err = %v", err)
	}
	if err := c.NameUnpublish(ctx, "svc"); err != nil {
		t.Fatalf("NameUnpublish: %v", err)
	}
	res, err := c.Spawn(ctx, &wire.Spawn{Cmds: []wire.SpawnCmd{{Cmd: "./c", Args: []string{"a"}, MaxProcs: 2}}})
	if err != nil || res.JobID != "8.0-1" || res.Errcodes != nil {
		t.Fatalf("Spawn = %+v %v", res, err)
	}
	if r, err := c.Ring(ctx, 1, "l", "r"); err != nil || r != (Ring{3, "L", "R"}) {
		t.Fatalf("Ring = %+v %v", r, err)
	}
	if _, err := c.Do(ctx, wire.New("bogus")); err != nil {
		t.Fatalf("Do(bogus): %v", err)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	if err := c.Abort(ctx, 3, "bye now"); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	c.Close()
	select {
	case <-srv.done:
	case <-ctx.Done():
		t.Fatal("server did not stop")
	}
	wantReq := []string{
		"cmd=init pmi_version=2 pmi_subversion=0",
		"cmd=fullinit;pmirank=2;",
		"cmd=job-getid;",
		"cmd=job-connect;jobid=9.0;",
		"cmd=job-disconnect;jobid=9.0;",
		"cmd=kvs-put;key=k;value=a;;b;",
		"cmd=kvs-fence;",
		"cmd=kvs-get;jobid=8.0;srcid=1;key=k;",
		"cmd=kvs-get;key=no-such-key;",
		"cmd=info-putnodeattr;key=na;value=x;",
		"cmd=info-getnodeattr;key=na;wait=TRUE;",
		"cmd=info-getnodeattr;key=no-na;",
		"cmd=info-getjobattr;key=PMI_process_mapping;",
		"cmd=name-publish;name=svc;port=p#1;infokeycount=1;infokey0=k;infoval0=v;",
		"cmd=name-lookup;name=svc;infokeycount=0;",
		"cmd=name-lookup;name=slurm;infokeycount=0;",
		"cmd=name-lookup;name=gone;infokeycount=0;",
		"cmd=name-unpublish;name=svc;infokeycount=0;",
		"cmd=spawn;ncmds=1;preputcount=0;subcmd=./c;maxprocs=2;argc=1;argv0=a;infokeycount=0;",
		"cmd=ring;ring-count=1;ring-left=l;ring-right=r;",
		"cmd=bogus;",
		"cmd=finalize;",
		"cmd=abort;exitcode=3;message=bye now;",
	}
	if diff := cmp.Diff(wantReq, srv.frames()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// A server may write the init reply and the first PMI-2 reply in one go;
// no byte may be lost when the client switches framing.
func TestClient2PipelinedInitReply(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte {
		if m.Cmd == "init" {
			return append(line("response_to_init", "pmi_version", "2", "pmi_subversion", "0", "rc", "0"),
				frame2("fullinit-response", "pmi-version", "2", "pmi-subversion", "0", "rank", "0", "size", "1", "appnum", "0", "rc", "0")...)
		}
		return nil
	})
	c := New2(conn)
	info, err := c.Init(ctx, FullInit{JobID: "5.0", Rank: Int(0), Threaded: Bool(false)})
	if err != nil || info.Size != 1 || info.Spawned {
		t.Fatalf("Init = %+v %v", info, err)
	}
}

func TestClient2Errors(t *testing.T) {
	tests := []struct {
		name  string
		reply []byte
		want  error
	}{
		{"rc with errmsg", frame2("fullinit-response", "rc", "3", "errmsg", "pmijobid missing"), &Error{}},
		{"no pmi-version", frame2("fullinit-response", "rc", "0", "rank", "0", "size", "1", "appnum", "0"), ErrProtocol},
		{"pmiverbose not a bool", frame2("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", "0", "size", "1", "appnum", "0", "pmiverbose", "0"), ErrProtocol},
		{"wrong reply", frame2("kvs-get-response", "rc", "0"), ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxT(t)
			conn, _ := startFake(t, func(m *wire.Message) []byte {
				if m.Cmd == "init" {
					return line("response_to_init", "pmi_version", "2", "pmi_subversion", "0", "rc", "0")
				}
				return tt.reply
			})
			_, err := New2(conn).Init(ctx, FullInit{})
			if pe := (*Error)(nil); errors.As(tt.want, &pe) {
				if !errors.As(err, &pe) || pe.Rc != 3 || pe.Msg != "pmijobid missing" || pe.Cmd != "fullinit" {
					t.Errorf("err = %v, want *Error rc=3", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestClient2InitRefused(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte {
		return line("response_to_init", "rc", "-1", "pmi_version", "1", "pmi_subversion", "1", "msg", "PMI-2 not served")
	})
	var pe *Error
	if err := New2(conn).InitLine(ctx); !errors.As(err, &pe) || pe.Msg != "PMI-2 not served" {
		t.Fatalf("err = %v", err)
	}
	conn2, _ := startFake(t, func(m *wire.Message) []byte {
		return line("response_to_init", "rc", "0", "pmi_version", "1", "pmi_subversion", "1")
	})
	if err := New2(conn2).InitLine(ctx); !errors.Is(err, ErrProtocol) {
		t.Fatalf("downgrade err = %v, want ErrProtocol", err)
	}
}

func TestClient2TooLong(t *testing.T) {
	conn, srv := startFake(t, silent)
	err := New2(conn).Send(ctxT(t), wire.New("kvs-put", "value", strings.Repeat("v", pmi2.MaxBody)))
	if !errors.Is(err, wire.ErrTooLong) || len(srv.requests()) != 0 {
		t.Fatalf("err = %v, requests = %d", err, len(srv.requests()))
	}
}

// SendRaw lets tests write MPICH 4.0's junk-carrying frames.
func TestClient2SendRaw(t *testing.T) {
	ctx := ctxT(t)
	conn, srv := startFake(t, server2)
	c := New2(conn)
	if err := c.InitLine(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SendRaw(ctx, []byte("20    cmd=kvs-fence;\x00;valu")); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv(ctx)
	if err != nil || m.Cmd != "kvs-fence-response" {
		t.Fatalf("Recv = %+v %v", m, err)
	}
	if got := srv.requests()[1]; got.Cmd != "kvs-fence" || len(got.Args) != 0 {
		t.Errorf("server read %+v", got)
	}
}

func TestClient2StrictBooleans(t *testing.T) {
	ctx := ctxT(t)
	conn, _ := startFake(t, func(m *wire.Message) []byte {
		if m.Cmd == "init" {
			return line("response_to_init", "pmi_version", "2", "pmi_subversion", "0", "rc", "0")
		}
		return frame2("kvs-get-response", "rc", "0", "found", "true", "value", "v")
	})
	c := New2(conn)
	if err := c.InitLine(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KVSGet(ctx, "", -1, "k"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("found=true err = %v, want ErrProtocol", err)
	}
}
