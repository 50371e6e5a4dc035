package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestPMI1Session(t *testing.T) {
	w := newWorld(t, 2, 1)
	a, b := w.task(0), w.task(1)
	for _, k := range []*tsk{a, b} {
		k.init1()
		k.send("cmd=get_maxes")
		k.expect("cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024")
		k.send("cmd=get_appnum")
		k.expect("cmd=appnum rc=0 appnum=0")
		k.send("cmd=get_universe_size")
		k.expect("cmd=universe_size rc=0 size=2")
		k.send("cmd=get_my_kvsname")
		k.expect("cmd=my_kvsname rc=0 kvsname=job-1")
		k.send("cmd=get kvsname=job-1 key=PMI_process_mapping")
		k.expect("cmd=get_result rc=0 value=(vector,(0,1,2))")
		k.send(fmt.Sprintf("cmd=put kvsname=job-1 key=card-%d value=addr of %d", k.rank, k.rank))
		k.expect("cmd=put_result rc=0")
	}
	// Puts are visible only after the barrier.
	a.send("cmd=get kvsname=job-1 key=card-1")
	a.expect("cmd=get_result rc=-1")
	a.send("cmd=barrier_in")
	a.silent()
	b.send("cmd=barrier_in")
	a.expect("cmd=barrier_out rc=0")
	b.expect("cmd=barrier_out rc=0")
	a.send("cmd=get kvsname=job-1 key=card-1")
	a.expect("cmd=get_result rc=0 value=addr of 1")
	b.send("cmd=get key=card-0")
	b.expect("cmd=get_result rc=0 value=addr of 0")
	for _, k := range []*tsk{a, b} {
		k.send("cmd=finalize")
		k.expect("cmd=finalize_ack rc=0")
		k.s.Close(nil)
	}
	if res := w.waitDone(0); res.Err != nil || res.Aborted {
		t.Fatalf("result = %+v, want a clean end", res)
	}
}

func TestPMI2Session(t *testing.T) {
	w := newWorld(t, 2, 1, withParent("job-0"))
	a, b := w.task(0), w.task(1)
	fi := a.init2()
	checkMsg(t, 0, fi, "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;spawner-jobid=job-0;")
	b.init2()
	a.send("cmd=job-getid;")
	a.expect("cmd=job-getid-response;rc=0;jobid=job-1;")
	a.send("cmd=kvs-put;key=k-0;value=has;; semicolon= and spaces;")
	a.expect("cmd=kvs-put-response;rc=0;")
	b.send("cmd=kvs-put;key=k-1;value=v1;")
	b.expect("cmd=kvs-put-response;rc=0;")
	a.send("cmd=kvs-fence;")
	b.send("cmd=kvs-fence;")
	a.expect("cmd=kvs-fence-response;rc=0;")
	b.expect("cmd=kvs-fence-response;rc=0;")
	b.send("cmd=kvs-get;jobid=job-1;srcid=0;key=k-0;")
	b.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=has;; semicolon= and spaces;")
	b.send("cmd=kvs-get;jobid=job-1;srcid=-1;key=no-such-key;")
	b.expect("cmd=kvs-get-response;rc=0;found=FALSE;")
	a.send("cmd=info-getjobattr;key=PMI_process_mapping;")
	a.expect("cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));")
	a.send("cmd=info-getjobattr;key=universeSize;")
	a.expect("cmd=info-getjobattr-response;rc=0;found=TRUE;value=2;")
	a.send("cmd=info-getjobattr;key=hasNameServ;")
	a.expect("cmd=info-getjobattr-response;rc=0;found=TRUE;value=TRUE;")
	a.send("cmd=info-getjobattr;key=PMI_netinfo_of_task;")
	a.expect("cmd=info-getjobattr-response;rc=0;found=FALSE;")
	// Node attribute with wait: b waits until a puts it.
	b.send("cmd=info-getnodeattr;key=shm;wait=TRUE;")
	b.silent()
	a.send("cmd=info-getnodeattr;key=shm;")
	a.expect("cmd=info-getnodeattr-response;rc=0;found=FALSE;")
	a.send("cmd=info-putnodeattr;key=shm;value=/dev/shm/x;")
	a.expect("cmd=info-putnodeattr-response;rc=0;")
	b.expect("cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;")
	// Name service: lookup answers both port= and value=.
	a.send("cmd=name-publish;name=svc;port=tag#0$port#5$;infokeycount=0;")
	a.expect("cmd=name-publish-response;rc=0;")
	a.send("cmd=name-publish;name=svc;port=again;infokeycount=0;")
	a.expect("cmd=name-publish-response;rc=1;errmsg=*;")
	b.send("cmd=name-lookup;name=svc;infokeycount=0;")
	b.expect("cmd=name-lookup-response;rc=0;found=TRUE;port=tag#0$port#5$;value=tag#0$port#5$;")
	b.send("cmd=name-lookup;name=nope;infokeycount=0;")
	b.expect("cmd=name-lookup-response;rc=1;found=FALSE;errmsg=*;")
	a.send("cmd=name-unpublish;name=svc;infokeycount=0;")
	a.expect("cmd=name-unpublish-response;rc=0;")
	// thrid is echoed.
	a.send("cmd=job-getid;thrid=0x7f;")
	a.expect("cmd=job-getid-response;rc=0;thrid=0x7f;")
	for _, k := range []*tsk{a, b} {
		k.send("cmd=finalize;")
		k.expect("cmd=finalize-response;rc=0;")
		k.s.Close(nil)
	}
	if res := w.waitDone(0); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// Hydra-style lazy fence: kvs-fence answers at once and MPICH's
// "-NONEXIST-KEY" get waits until every rank has fenced.
func TestLazyFence(t *testing.T) {
	w := newWorld(t, 2, 1, withMode(FenceLazy))
	a, b := w.task(0), w.task(1)
	a.init2()
	b.init2()
	a.send("cmd=kvs-put;key=a;value=1;")
	a.expect("cmd=kvs-put-response;rc=0;")
	a.send("cmd=kvs-fence;")
	a.expect("cmd=kvs-fence-response;rc=0;")
	a.send("cmd=kvs-get;jobid=job-1;key=-NONEXIST-KEY;")
	a.silent()
	b.send("cmd=kvs-put;key=b;value=2;")
	b.expect("cmd=kvs-put-response;rc=0;")
	b.send("cmd=kvs-fence;")
	b.expect("cmd=kvs-fence-response;rc=0;")
	a.expect("cmd=kvs-get-response;rc=0;found=FALSE;")
	a.send("cmd=kvs-get;jobid=job-1;key=b;")
	a.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=2;")
	b.send("cmd=kvs-get;jobid=job-1;key=a;")
	b.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=1;")
}

// Data put in a job stays readable until the job ends, whichever node
// finishes first. A node's last finalize is answered only once every
// fence the node entered completed (a lazy fence answered at once still
// owes the other nodes its part, which leaves with the backend call) and
// the backend holds the node's data without the node (Depart): its rank
// exits once answered, and its server with it.
func TestLastFinalizeHandsOver(t *testing.T) {
	for _, depart := range []bool{true, false} {
		t.Run(fmt.Sprintf("depart=%v", depart), func(t *testing.T) {
			caps := []string{plugin.CapPublish}
			if depart {
				caps = append(caps, plugin.CapDepart)
			}
			w := newWorld(t, 4, 2, withMode(FenceLazy), withCaps(caps...))
			for _, k := range w.tasks {
				k.init2()
			}
			// Node n1's ranks put, fence (answered at once), finalize.
			for _, k := range w.tasks[2:] {
				k.send(fmt.Sprintf("cmd=kvs-put;key=k%d;value=v%d;", k.rank, k.rank))
				k.expect("cmd=kvs-put-response;rc=0;")
				k.send("cmd=kvs-fence;")
				k.expect("cmd=kvs-fence-response;rc=0;")
			}
			w.task(2).send("cmd=finalize;")
			w.task(2).expect("cmd=finalize-response;rc=0;") // not the last
			w.task(3).send("cmd=finalize;")
			w.task(3).silent() // its fence has not completed: node n0 is not there yet
			if d := w.rm.departed(); len(d) != 0 {
				t.Fatalf("departed %v before the node's fence completed", d)
			}
			// Node n0's ranks fence: the fence completes, n1 departs
			// and its last finalize is answered.
			for _, k := range w.tasks[:2] {
				k.send("cmd=kvs-fence;")
				k.expect("cmd=kvs-fence-response;rc=0;")
			}
			w.task(3).expect("cmd=finalize-response;rc=0;")
			want := []string{"n1"}
			if !depart {
				want = nil // a backend without the capability is not asked
			}
			if d := w.rm.departed(); !slices.Equal(d, want) {
				t.Fatalf("departed %v, want %v", d, want)
			}
			// n0's ranks read n1's data, finalize; n0 departs too.
			w.task(0).send("cmd=kvs-get;jobid=job-1;key=k3;")
			w.task(0).expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v3;")
			for _, k := range w.tasks[:2] {
				k.send("cmd=finalize;")
				k.expect("cmd=finalize-response;rc=0;")
			}
			if depart {
				want = append(want, "n0")
			}
			if d := w.rm.departed(); !slices.Equal(d, want) {
				t.Fatalf("departed %v, want %v", d, want)
			}
		})
	}
}

// A job on one node needs no exchange: its fences complete on the node,
// whatever the backend says.
func TestSingleNodeFenceStaysLocal(t *testing.T) {
	w := newWorld(t, 2, 1)
	w.rm.fenceErr = errors.New("the backend must not be asked")
	for _, k := range w.tasks {
		k.init2()
		k.send("cmd=kvs-put;key=k;value=v;")
		k.expect("cmd=kvs-put-response;rc=0;")
		k.send("cmd=kvs-fence;")
	}
	for _, k := range w.tasks {
		k.expect("cmd=kvs-fence-response;rc=0;")
		k.send("cmd=kvs-get;jobid=job-1;key=k;")
		k.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v;")
	}
}

// publishedRecords decodes what the fake RM received in the publish
// fences (not PMI fences) of node.
func publishedRecords(t *testing.T, rm *fakeRM, node string) (reqs []*plugin.FenceRequest, recs map[string]string) {
	t.Helper()
	recs = map[string]string{}
	for _, req := range rm.fenceRequests() {
		if !strings.HasPrefix(req.ID, "publish:"+node+"/") {
			continue
		}
		reqs = append(reqs, req)
		if req.Collect || req.Node != node {
			t.Errorf("publish fence %s: collect=%v node=%q", req.ID, req.Collect, req.Node)
		}
		if err := kvs.Decode(req.Data, func(r kvs.Record) error {
			recs[r.Key] = fmt.Sprintf("%d:%s", r.Rank, r.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return reqs, recs
}

// A job on one node still gives its fence data to a backend that is up,
// so other jobs (parent, children, connected jobs) can read it.
func TestSingleNodeFencePublished(t *testing.T) {
	w := newWorld(t, 2, 1)
	for _, k := range w.tasks {
		k.init2()
		k.send(fmt.Sprintf("cmd=kvs-put;key=k%d;value=v%d;", k.rank, k.rank))
		k.expect("cmd=kvs-put-response;rc=0;")
		k.send("cmd=kvs-fence;")
	}
	for _, k := range w.tasks {
		k.expect("cmd=kvs-fence-response;rc=0;")
	}
	want := map[string]string{"k0": "0:v0", "k1": "1:v1"}
	w.check("both puts published", func() bool {
		_, recs := publishedRecords(t, w.rm, "n0")
		return fmt.Sprint(recs) == fmt.Sprint(want)
	})
	reqs, _ := publishedRecords(t, w.rm, "n0")
	if len(reqs) != 1 || len(reqs[0].Procs) != 1 || reqs[0].Procs[0].Rank != plugin.RankWildcard || len(reqs[0].LocalProcs) != 2 {
		t.Fatalf("publish fences: %+v", reqs)
	}
	// A fence with no new puts publishes nothing.
	for _, k := range w.tasks {
		k.send("cmd=kvs-fence;")
	}
	for _, k := range w.tasks {
		k.expect("cmd=kvs-fence-response;rc=0;")
	}
	if reqs, _ := publishedRecords(t, w.rm, "n0"); len(reqs) != 1 {
		t.Fatalf("%d publish fences after an empty fence, want 1", len(reqs))
	}
}

// Before its backend is up a one-node job keeps its fence data, and
// sends it once something brought the backend up; it never starts the
// backend for this alone.
func TestSingleNodePublishWaitsForBackend(t *testing.T) {
	late, lb := withLateBackend(false, &plugin.BackendInfo{Name: "late", Capabilities: []string{plugin.CapPublish}})
	w := newWorld(t, 1, 1, late)
	k := w.task(0)
	k.init2()
	k.send("cmd=kvs-put;key=a;value=1;")
	k.expect("cmd=kvs-put-response;rc=0;")
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	k.send("cmd=kvs-put;key=b;value=2;")
	k.expect("cmd=kvs-put-response;rc=0;")
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	if lb.asked {
		t.Fatal("fences of a one-node job asked for the backend")
	}
	if reqs := w.rm.fenceRequests(); len(reqs) != 0 {
		t.Fatalf("fences reached a backend that is not up: %+v", reqs)
	}
	// The name service needs the backend; once it is up the kept data
	// follows.
	k.send("cmd=name-publish;name=svc;port=p;infokeycount=0;")
	k.silent()
	if !lb.asked {
		t.Fatal("the name service did not ask for the backend")
	}
	lb.up()
	k.expect("cmd=name-publish-response;rc=0;")
	want := map[string]string{"a": "0:1", "b": "0:2"}
	w.check("kept puts published", func() bool {
		_, recs := publishedRecords(t, w.rm, "n0")
		return fmt.Sprint(recs) == fmt.Sprint(want)
	})
	// From now on each fence publishes its own puts.
	k.send("cmd=kvs-put;key=c;value=3;")
	k.expect("cmd=kvs-put-response;rc=0;")
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	want["c"] = "0:3"
	w.check("later puts published", func() bool {
		_, recs := publishedRecords(t, w.rm, "n0")
		return fmt.Sprint(recs) == fmt.Sprint(want)
	})
}

// A spawned job on one node asks for its backend to publish its fence
// data: its parent reads it.
func TestSpawnedJobPublishes(t *testing.T) {
	late, lb := withLateBackend(true, &plugin.BackendInfo{Name: "fake"})
	w := newWorld(t, 1, 1, withParent("job-0"), late)
	k := w.task(0)
	k.init2()
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	if lb.asked {
		t.Fatal("a fence without puts asked for the backend")
	}
	k.send("cmd=kvs-put;key=a;value=1;")
	k.expect("cmd=kvs-put-response;rc=0;")
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	if !lb.asked {
		t.Fatal("the spawned job did not ask for its backend")
	}
	w.check("the spawned job's puts published", func() bool {
		_, recs := publishedRecords(t, w.rm, "n0")
		return recs["a"] == "0:1"
	})
}

// Puts that a PMI 1.2 NODE barrier committed on one node of several
// reach the other nodes with the next world fence.
func TestNodeBarrierDataReachesOtherNodes(t *testing.T) {
	w := newWorld(t, 4, 2)
	w.init12()
	w.task(0).send("cmd=put kvsname=job-1 key=shm value=seg0")
	w.task(0).expect("cmd=put_result rc=0")
	w.task(0).send("cmd=barrier_in group=NODE:5")
	w.task(1).send("cmd=barrier_in group=NODE:5")
	w.task(0).expect("cmd=barrier_out rc=0 tag=5")
	w.task(1).expect("cmd=barrier_out rc=0 tag=5")
	w.task(1).send("cmd=get kvsname=job-1 key=shm")
	w.task(1).expect("cmd=get_result rc=0 value=seg0")
	for _, k := range w.tasks {
		k.send("cmd=barrier_in")
	}
	for _, k := range w.tasks {
		k.expect("cmd=barrier_out rc=0")
	}
	for _, k := range w.tasks[2:] {
		k.send("cmd=get kvsname=job-1 key=shm")
		k.expect("cmd=get_result rc=0 value=seg0")
	}
	if reqs, _ := publishedRecords(t, w.rm, "n0"); len(reqs) != 0 {
		t.Fatalf("a job on two nodes published: %+v", reqs)
	}
}

// Two simulated nodes: one backend fence per node, data merged.
func TestCrossNodeFence(t *testing.T) {
	w := newWorld(t, 4, 2)
	for _, k := range w.tasks {
		k.init1()
		k.send("cmd=get key=PMI_process_mapping")
		k.expect("cmd=get_result rc=0 value=(vector,(0,2,2))")
		k.send(fmt.Sprintf("cmd=put key=r%d value=v%d", k.rank, k.rank))
		k.expect("cmd=put_result rc=0")
	}
	for _, k := range w.tasks {
		k.send("cmd=barrier_in")
	}
	for _, k := range w.tasks {
		k.expect("cmd=barrier_out rc=0")
	}
	for _, k := range w.tasks {
		for r := 0; r < 4; r++ {
			k.send(fmt.Sprintf("cmd=get key=r%d", r))
			k.expect(fmt.Sprintf("cmd=get_result rc=0 value=v%d", r))
		}
	}
	w.rm.mu.Lock()
	calls := len(w.rm.fences)
	w.rm.mu.Unlock()
	if calls != 1 {
		t.Fatalf("backend saw %d fences, want 1", calls)
	}
}

// Barrier plus direct modex: remote keys are fetched on demand.
func TestModexFence(t *testing.T) {
	w := newWorld(t, 4, 2, withMode(FenceModex))
	for _, k := range w.tasks {
		k.init2()
		k.send(fmt.Sprintf("cmd=kvs-put;key=r%d;value=v%d;", k.rank, k.rank))
		k.expect("cmd=kvs-put-response;rc=0;")
	}
	for _, k := range w.tasks {
		k.send("cmd=kvs-fence;")
	}
	for _, k := range w.tasks {
		k.expect("cmd=kvs-fence-response;rc=0;")
	}
	a := w.task(0)
	a.send("cmd=kvs-get;jobid=job-1;srcid=1;key=r1;") // same node: no backend
	a.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v1;")
	a.send("cmd=kvs-get;jobid=job-1;srcid=3;key=r3;")
	a.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v3;")
	a.send("cmd=kvs-get;jobid=job-1;srcid=2;key=r2;") // fetched with r3's node
	a.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v2;")
	a.send("cmd=kvs-get;jobid=job-1;srcid=3;key=missing;")
	a.expect("cmd=kvs-get-response;rc=0;found=FALSE;")
	w.rm.mu.Lock()
	n := len(w.rm.modex)
	w.rm.mu.Unlock()
	if n != 1 {
		t.Fatalf("direct modex calls = %d, want 1", n)
	}
}

func TestFenceTimeoutNamesMissingRanks(t *testing.T) {
	clk := crew.NewFake()
	w := newWorld(t, 4, 1, withClock(clk), withTimeouts(Timeouts{Fence: 30 * time.Second}))
	for _, k := range w.tasks {
		k.init1()
	}
	w.task(0).send("cmd=barrier_in")
	w.task(2).send("cmd=barrier_in")
	clk.Advance(29 * time.Second)
	w.task(0).silent()
	clk.Advance(2 * time.Second)
	m := w.task(0).expect("cmd=barrier_out rc=-1")
	if msg := m.Value("msg"); !strings.Contains(msg, "ranks_1,3_(node_n0)_did_not_arrive_within_30s") {
		t.Fatalf("msg = %q, want the missing ranks named", msg)
	}
	w.task(2).expect("cmd=barrier_out rc=-1")
	// A late arrival learns the fence failed at once.
	w.task(1).send("cmd=barrier_in")
	w.task(1).expect("cmd=barrier_out rc=-1")
}

func TestBackendFenceErrorReachesClients(t *testing.T) {
	w := newWorld(t, 4, 2)
	w.rm.fenceErr = fmt.Errorf("ranks 4-7 (node n1) did not arrive in 30s: %w", plugin.ErrTimeout)
	for _, k := range w.tasks {
		k.init2()
		k.send("cmd=kvs-fence;")
	}
	for _, k := range w.tasks {
		m := k.expect("cmd=kvs-fence-response;rc=-1;")
		if !strings.Contains(m.Value("errmsg"), "ranks 4-7 (node n1) did not arrive") {
			t.Fatalf("errmsg = %q", m.Value("errmsg"))
		}
	}
}

// A task that closes after init but before finalize fails the job: the
// rank waiting in a barrier is answered, the backend hears of it.
func TestEarlyExitFailsJob(t *testing.T) {
	w := newWorld(t, 2, 1)
	a, b := w.task(0), w.task(1)
	a.init1()
	b.init1()
	a.send("cmd=barrier_in")
	a.silent()
	b.s.Close(nil)
	m := a.expect("cmd=barrier_out rc=-1")
	if !strings.Contains(m.Value("msg"), "rank_1_of_job_job-1_closed_its_PMI_connection_before_finalize") {
		t.Fatalf("msg = %q", m.Value("msg"))
	}
	res := w.waitDone(0)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "rank 1") {
		t.Fatalf("result = %+v", res)
	}
	w.check("backend notified", func() bool {
		_, ev, _ := w.rm.snapshot()
		return len(ev) == 1 && ev[0].Code == plugin.EventProcAborted && ev[0].Source.Rank == 1
	})
	// Requests after the end are answered, not dropped.
	a.send("cmd=barrier_in")
	a.expect("cmd=barrier_out rc=-1")
}

// A task that never spoke PMI may exit: hostname under gopmi run.
func TestNonPMITaskMayExit(t *testing.T) {
	w := newWorld(t, 2, 1)
	w.task(0).s.Close(nil)
	w.task(1).s.Close(nil)
	if res := w.waitDone(0); res.Err != nil {
		t.Fatal(res.Err)
	}
}

func TestAbort(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		v          int
		status     int
		msg        string
	}{
		{"pmi1 mpich", "cmd=abort exitcode=7 message=rank 1 says goodbye", 1, 7, "rank 1 says goodbye"},
		{"pmi1 flux spelling", "cmd=abort exit_code=3 error_msg=x", 1, 3, "x"},
		{"pmi2 slurm", "cmd=abort;isworld=TRUE;msg=boom;", 2, 1, "boom"},
		{"pmi2 mpich", "cmd=abort;exitcode=-1;message=oops;", 2, -1, "oops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 2, 1)
			a, b := w.task(0), w.task(1)
			if tc.v == 2 {
				a.init2()
				b.init2()
			} else {
				a.init1()
				b.init1()
			}
			if tc.v == 2 {
				a.send("cmd=kvs-fence;")
			} else {
				a.send("cmd=barrier_in")
			}
			b.send(tc.line)
			// The client exits right after its abort.
			b.s.Close(nil)
			res := w.waitDone(0)
			if !res.Aborted || res.Status != tc.status || !errors.Is(res.Err, plugin.ErrAborted) {
				t.Fatalf("result = %+v", res)
			}
			w.check("backend abort", func() bool {
				aborts, _, _ := w.rm.snapshot()
				return len(aborts) > 0
			})
			aborts, events, _ := w.rm.snapshot()
			if len(events) != 0 {
				t.Fatalf("the abort was also reported as an early exit: %+v", events)
			}
			if len(aborts) != 1 || aborts[0].Status != int32(tc.status) || aborts[0].Message != tc.msg || aborts[0].Proc.Rank != 1 {
				t.Fatalf("backend aborts = %+v", aborts)
			}
			if len(aborts[0].Targets) != 0 {
				t.Fatalf("world abort has targets %v", aborts[0].Targets)
			}
			// The rank waiting in the fence is answered.
			m := a.reply()
			if m == nil || m.Value("rc") == "0" {
				t.Fatalf("fence waiter got %+v", m)
			}
			b.silent()
		})
	}
}

// An RM kills the tasks when it hears of an abort: their connections
// closing before finalize are part of the abort, and the job ends aborted,
// not failed by an early exit, whichever comes first.
func TestAbortThenTasksKilled(t *testing.T) {
	w := newWorld(t, 3, 1)
	for _, k := range w.tasks {
		k.init1()
	}
	w.rm.killOnAbort = func() {
		w.task(0).s.Close(nil)
		w.task(2).s.Close(nil)
	}
	w.task(1).send("cmd=abort exitcode=9")
	w.task(1).s.Close(nil)
	res := w.waitDone(0)
	if !res.Aborted || res.Status != 9 {
		t.Fatalf("result = %+v, want aborted with status 9", res)
	}
	if _, events, _ := w.rm.snapshot(); len(events) != 0 {
		t.Fatalf("the killed tasks were reported as early exits: %+v", events)
	}
}

// owner is a PMI_PORT peer of the job's user.
var owner = PortPeer{Owner: true, Describe: func() string { return "uid 1000, pid 42 (owner)" }}

// stranger is a PMI_PORT peer of another user.
var stranger = PortPeer{Describe: func() string { return "uid 1001, pid 66 (stranger)" }}

func TestPMIPort(t *testing.T) {
	w := newWorldRM(t, newFakeRM(), 2, 1, false)
	j := w.job(0)
	a := w.task(0)
	a.s = j.AttachPort(a.c, owner)
	a.send("cmd=get_maxes")
	a.expect("cmd=maxes rc=-1")
	a.send("cmd=initack pmiid=0")
	a.expect("cmd=initack rc=0")
	a.expect("cmd=set size=2")
	a.expect("cmd=set rank=0")
	a.expect("cmd=set debug=0")
	a.init1()
	// A second connection may not take rank 0.
	x := &tsk{t: t, q: w.q, rank: 0, c: newConn()}
	x.s = j.AttachPort(x.c, owner)
	x.send("cmd=initack pmiid=0")
	m := x.expect("cmd=initack rc=3")
	if !strings.Contains(m.Value("msg"), "already_claimed_by_another_connection_(uid_1000,_pid_42_(owner))") {
		t.Errorf("second claim's msg = %q, want the first claimer named", m.Value("msg"))
	}
	x.send("cmd=initack pmiid=9")
	x.expect("cmd=initack rc=3")
	// PMI-2 in port mode binds at fullinit.
	b := w.task(1)
	b.s = j.AttachPort(b.c, owner)
	b.init2()
	// Once claimed, a rank stays claimed after its connection is gone.
	b.s.Close(nil)
	y := &tsk{t: t, q: w.q, rank: 1, c: newConn()}
	y.s = j.AttachPort(y.c, owner)
	y.send("cmd=initack pmiid=1")
	y.expect("cmd=initack rc=3")
}

// TestPMIPortStranger: a PMI_PORT peer that is not the job's user cannot
// claim a rank without the secret: PMI-1 cannot authenticate at all, PMI-2
// must answer the challenge. Each refusal closes the connection.
func TestPMIPortStranger(t *testing.T) {
	const secret = "s3cret"
	w := newWorldRM(t, newFakeRM(), 3, 1, false, func(c *jobSetup) { c.PortSecret = secret })
	j := w.job(0)
	port := func(rank int32, p PortPeer) *tsk {
		k := &tsk{t: t, q: w.q, rank: rank, c: newConn()}
		k.s = j.AttachPort(k.c, p)
		return k
	}
	to2 := func(k *tsk) {
		k.send("cmd=init pmi_version=2 pmi_subversion=0")
		k.expect("cmd=response_to_init rc=0")
		k.c.mu.Lock()
		k.c.version = 2
		k.c.mu.Unlock()
	}

	// No spawn without a rank: it would run programs as the job's user.
	sp := port(0, stranger)
	sp.raw("mcmd=spawn\nnprocs=1\nexecname=/bin/sh\ntotspawns=1\nspawnssofar=1\nargcnt=2\narg1=-c\narg2=id\npreput_num=0\ninfo_num=0\nendcmd\n")
	sp.expect("cmd=spawn_result rc=-1")
	if _, _, spawns := w.rm.snapshot(); len(spawns) != 0 {
		t.Fatalf("a connection without a rank spawned %+v", spawns[0])
	}

	a := port(0, stranger)
	a.init1()
	a.send("cmd=initack pmiid=0")
	m := a.expect("cmd=initack rc=-1")
	if !strings.Contains(m.Value("msg"), "uid_1001,_pid_66") {
		t.Errorf("msg = %q, want the peer named", m.Value("msg"))
	}
	if !a.c.isClosed() {
		t.Error("refused PMI-1 connection left open")
	}

	b := port(0, stranger)
	to2(b)
	b.send("cmd=fullinit;pmirank=0;")
	m = b.expect("cmd=fullinit-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), "authtype=challenge-sha256") {
		t.Errorf("errmsg = %q, want the way to authenticate", m.Value("errmsg"))
	}
	if !b.c.isClosed() {
		t.Error("refused PMI-2 connection left open")
	}

	c := port(0, stranger)
	to2(c)
	c.send("cmd=fullinit;pmirank=0;authtype=challenge-sha256;")
	ch := c.expect("cmd=auth-response;authinfo=*;")
	c.send("cmd=auth-response-complete;authinfo=" + ChallengeAnswer("wrong", ch.Value("authinfo")) + ";")
	m = c.expect("cmd=fullinit-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), "authentication failed") || !c.c.isClosed() {
		t.Errorf("wrong answer: errmsg %q, closed %v", m.Value("errmsg"), c.c.isClosed())
	}

	d := port(0, stranger)
	to2(d)
	d.send("cmd=fullinit;pmirank=0;authtype=kerberos;")
	d.expect("cmd=fullinit-response;rc=-1;")

	// The right answer binds the rank, and the session serves.
	e := port(0, stranger)
	to2(e)
	e.send("cmd=auth-response-complete;authinfo=00;")
	e.expect("cmd=fullinit-response;rc=-1;") // no challenge asked yet
	e.send("cmd=fullinit;pmirank=0;authtype=challenge-sha256;")
	ch = e.expect("cmd=auth-response;authinfo=*;")
	n := ch.Value("authinfo")
	if _, err := strconv.ParseUint(n, 10, 64); err != nil {
		t.Fatalf("authinfo %q is not an integer", n)
	}
	e.send("cmd=auth-response-complete;authinfo=" + strings.ToUpper(ChallengeAnswer(secret, n)) + ";")
	e.expect("cmd=fullinit-response;rc=0;rank=0;size=3;")
	e.send("cmd=job-getid;")
	e.expect("cmd=job-getid-response;rc=0;jobid=job-1;")

	// Two challenges never share a nonce.
	f := port(1, stranger)
	to2(f)
	f.send("cmd=fullinit;pmirank=1;authtype=challenge-sha256;")
	if f.expect("cmd=auth-response;authinfo=*;").Value("authinfo") == n {
		t.Error("the same nonce twice")
	}

	// The job's user needs no secret; one that authenticates anyway may.
	g := port(2, owner)
	to2(g)
	g.send("cmd=fullinit;pmirank=2;authtype=challenge-sha256;")
	ch = g.expect("cmd=auth-response;authinfo=*;")
	g.send("cmd=auth-response-complete;authinfo=" + ChallengeAnswer(secret, ch.Value("authinfo")) + ";")
	g.expect("cmd=fullinit-response;rc=0;rank=2;")
}

// TestAuthOnTaskSocket: a client that asks for challenge-sha256 on its own
// socket (PMI_FD) of a job without PMI_PORT is served without one.
func TestAuthOnTaskSocket(t *testing.T) {
	w := newWorld(t, 1, 1)
	k := w.task(0)
	k.send("cmd=init pmi_version=2 pmi_subversion=0")
	k.expect("cmd=response_to_init rc=0")
	k.c.mu.Lock()
	k.c.version = 2
	k.c.mu.Unlock()
	k.send("cmd=fullinit;pmirank=0;authtype=challenge-sha256;")
	k.expect("cmd=fullinit-response;rc=0;rank=0;")
}

func TestSpawn(t *testing.T) {
	w := newWorld(t, 1, 1)
	k := w.task(0)
	k.init1()
	k.raw("mcmd=spawn\nnprocs=2\nexecname=./child\ntotspawns=2\nspawnssofar=1\n")
	k.raw("argcnt=2\narg1=--flag\narg2=x y\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$port#1$\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\nendcmd\n")
	k.silent() // only the last block is answered
	k.raw("mcmd=spawn\nnprocs=1\nexecname=other\ntotspawns=2\nspawnssofar=2\nargcnt=0\npreput_num=0\ninfo_num=1\ninfo_key_0=path\ninfo_val_0=/opt/bin\nendcmd\n")
	k.expect("cmd=spawn_result rc=0 jobid=job-2")
	_, _, spawns := w.rm.snapshot()
	if len(spawns) != 1 {
		t.Fatalf("spawns = %d", len(spawns))
	}
	sp := spawns[0]
	if len(sp.Apps) != 2 || sp.Apps[0].Cmd != "./child" || sp.Apps[0].MaxProcs != 2 ||
		strings.Join(sp.Apps[0].Argv, "|") != "--flag|x y" || sp.Apps[0].Cwd != "/tmp" || len(sp.Apps[0].Info) != 0 ||
		sp.Apps[1].Cmd != "other" || sp.Apps[1].Info[0] != (plugin.Info{Key: "path", Value: "/opt/bin"}) {
		t.Fatalf("spawn request = %+v", sp)
	}
	if len(sp.Preput) != 1 || sp.Preput[0].Key != "PARENT_ROOT_PORT_NAME" || sp.Requestor.Rank != 0 {
		t.Fatalf("spawn request = %+v", sp)
	}

	w2 := newWorld(t, 1, 1)
	k2 := w2.task(0)
	k2.init2()
	k2.send("cmd=spawn;ncmds=1;preputcount=1;ppkey0=gopmi-preput;ppval0=preput-val;subcmd=./bin/pmi2test;maxprocs=2;argc=1;argv0=child;infokeycount=1;infokey0=map_by;infoval0=node;")
	m := k2.expect("cmd=spawn-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), `"map_by"`) {
		t.Fatalf("errmsg = %q, want the refused key named", m.Value("errmsg"))
	}
	k2.send("cmd=spawn;ncmds=1;preputcount=0;subcmd=./a;maxprocs=2;argc=0;infokeycount=0;")
	k2.expect("cmd=spawn-response;rc=0;jobid=job-2;")
}

func TestPreputVisibleToChild(t *testing.T) {
	w := newWorld(t, 1, 1, withPreput("PARENT_ROOT_PORT_NAME", "port#1$"), withParent("job-0"))
	k := w.task(0)
	k.init2()
	k.send("cmd=kvs-get;jobid=job-1;srcid=-1;key=PARENT_ROOT_PORT_NAME;")
	k.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=port#1$;")
}

func TestRing(t *testing.T) {
	w := newWorld(t, 4, 2)
	for _, k := range w.tasks {
		k.init2()
	}
	for _, k := range w.tasks {
		v := fmt.Sprintf("v%d", k.rank)
		k.send(fmt.Sprintf("cmd=ring;ring-count=1;ring-left=%s;ring-right=%s;", v, v))
	}
	for _, k := range w.tasks {
		r := int(k.rank)
		k.expect(fmt.Sprintf("cmd=ring-response;rc=0;ring-count=%d;ring-left=v%d;ring-right=v%d;", r, (r+3)%4, (r+1)%4))
	}
}

// Puts made before a ring are not the ring's: the next fence commits
// them, on one node and across nodes.
func TestPutsSurviveRing(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			w := newWorld(t, 2, nodes)
			for _, k := range w.tasks {
				k.init2()
				k.send(fmt.Sprintf("cmd=kvs-put;key=k%d;value=v%d;", k.rank, k.rank))
				k.expect("cmd=kvs-put-response;rc=0;")
			}
			for _, k := range w.tasks {
				k.send("cmd=ring;ring-count=1;ring-left=l;ring-right=r;")
			}
			for _, k := range w.tasks {
				k.expect("cmd=ring-response;rc=0;")
				k.send("cmd=kvs-fence;")
			}
			for _, k := range w.tasks {
				k.expect("cmd=kvs-fence-response;rc=0;")
				other := 1 - k.rank
				k.send(fmt.Sprintf("cmd=kvs-get;jobid=job-1;key=k%d;", other))
				k.expect(fmt.Sprintf("cmd=kvs-get-response;rc=0;found=TRUE;value=v%d;", other))
			}
		})
	}
}

func TestMissingCapabilityIsNamed(t *testing.T) {
	w := newWorld(t, 1, 1, withCaps())
	k := w.task(0)
	k.init2()
	k.send("cmd=name-publish;name=x;port=y;infokeycount=0;")
	m := k.expect("cmd=name-publish-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), `fake does not provide a name service (capability "publish")`) {
		t.Fatalf("errmsg = %q", m.Value("errmsg"))
	}
	k.send("cmd=job-connect;jobid=other;")
	k.expect("cmd=job-connect-response;rc=-1;")
	k.send("cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=0;infokeycount=0;")
	k.expect("cmd=spawn-response;rc=-1;")
	k.send("cmd=info-getjobattr;key=hasNameServ;")
	k.expect("cmd=info-getjobattr-response;rc=0;found=TRUE;value=FALSE;")
}

func TestJobConnectAndForeignGet(t *testing.T) {
	w := newWorld(t, 1, 1)
	w.rm.foreign["job-9"] = kvs.AppendRecord(nil, kvs.Record{Rank: 0, Key: "card", Value: "v9"})
	k := w.task(0)
	k.init2()
	k.send("cmd=job-connect;jobid=job-9;")
	k.expect("cmd=job-connect-response;rc=0;kvscopy=FALSE;")
	w.rm.mu.Lock()
	connects := w.rm.connects
	w.rm.mu.Unlock()
	wantProcs := []plugin.Proc{{Nspace: "job-1", Rank: plugin.RankWildcard}, {Nspace: "job-9", Rank: plugin.RankWildcard}}
	if len(connects) != 1 || !slices.Equal(connects[0].Procs, wantProcs) {
		t.Fatalf("backend connects = %+v, want one of %v", connects, wantProcs)
	}
	k.send("cmd=kvs-get;jobid=job-9;srcid=0;key=card;")
	k.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=v9;")
	k.send("cmd=kvs-get;jobid=job-8;key=card;")
	k.expect("cmd=kvs-get-response;rc=-1;")
	k.send("cmd=job-disconnect;jobid=job-9;")
	k.expect("cmd=job-disconnect-response;rc=0;")
}

// Bad input of every kind gets an answer with rc!=0 and a message; the
// session keeps working afterwards.
func TestBadInput(t *testing.T) {
	w := newWorld(t, 1, 1, withValMax(16))
	k := w.task(0)
	k.init1()
	for _, tc := range []struct{ send, want string }{
		{"cmd=frobnicate", "cmd=frobnicate_result rc=-1"},
		{"cmd=put key=k", "cmd=put_result rc=6"},
		{"cmd=put value=v", "cmd=put_result rc=4"},
		{"cmd=put key=k value=01234567890123456789", "cmd=put_result rc=7"},
		{"cmd=put key=" + strings.Repeat("k", 65) + " value=v", "cmd=put_result rc=5"},
		{"cmd=put key=a key=b value=v", "cmd=put_result rc=3"},
		{"cmd=put kvsname=other key=k value=v", "cmd=put_result rc=3"},
		{"cmd=get", "cmd=get_result rc=4"},
		{"cmd=barrier_in group=NOPE:x", "cmd=barrier_out rc=3"},
		{"cmd=barrier_in group=5,6:1", "cmd=barrier_out rc=3"},
		{"cmd=getbyidx idx=0", "cmd=getbyidx_results rc=3"},
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init rc=-1"},
		{"cmd=lookup_name", "cmd=lookup_result rc=3"},
		{"no command here", "rc=3"},
	} {
		k.send(tc.send)
		m := k.reply()
		if m == nil {
			t.Fatalf("%q: no reply", tc.send)
		}
		if tc.want == "rc=3" {
			if m.Value("rc") != "3" {
				t.Fatalf("%q: reply %+v", tc.send, m)
			}
		} else {
			checkMsg(t, 0, m, tc.want)
		}
		if m.Value("rc") != "0" && m.Value("msg") == "" {
			t.Fatalf("%q: error reply without msg: %+v", tc.send, m)
		}
	}
	// An oversized line is skipped and answered; the next line works.
	k.raw("cmd=put key=k value=" + strings.Repeat("x", 2<<20) + "\n")
	k.expect("cmd=put_result rc=8")
	k.send("cmd=get_appnum")
	k.expect("cmd=appnum rc=0")
}

func TestBadInputPMI2(t *testing.T) {
	w := newWorld(t, 1, 1)
	k := w.task(0)
	k.init2()
	for _, tc := range []struct{ send, want string }{
		{"cmd=frobnicate;", "cmd=frobnicate-response;rc=14;"},
		{"cmd=kvs-get;key=k;srcid=abc;", "cmd=kvs-get-response;rc=3;"},
		{"cmd=info-getnodeattr;key=k;wait=maybe;", "cmd=info-getnodeattr-response;rc=3;"},
		{"cmd=name-publish;name=a;port=b;infokeycount=2;infokey0=x;infoval0=y;", "cmd=name-publish-response;rc=3;"},
		{"cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;argc=0;infokeycount=0;", "cmd=spawn-response;rc=3;"},
		{"cmd=spawn;ncmds=1;subcmd=a;maxprocs=0;argc=0;infokeycount=0;", "cmd=spawn-response;rc=3;"},
		{"cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=2;argv0=x;infokeycount=0;", "cmd=spawn-response;rc=3;"},
		{"cmd=fullinit;pmirank=3;", "cmd=fullinit-response;rc=3;"},
		{"cmd=ring;ring-count=x;", "cmd=ring-response;rc=3;"},
	} {
		k.send(tc.send)
		m := k.expect(tc.want)
		if m.Value("errmsg") == "" {
			t.Fatalf("%q: no errmsg", tc.send)
		}
	}
	// MPICH 4.0.2's off-by-6 junk inside the declared length is ignored.
	k.raw("20    cmd=kvs-fence;\x00;valu")
	k.expect("cmd=kvs-fence-response;rc=0;")
	k.raw("20    cmd=job-getid;\x00\x00\x00\x00\x00\x00")
	k.expect("cmd=job-getid-response;rc=0;jobid=job-1;")
	// A right-aligned length works too.
	k.raw("    14cmd=job-getid;")
	k.expect("cmd=job-getid-response;rc=0;")
	// A garbled length cannot be resynchronised: answered, then closed.
	k.raw("abcdefcmd=job-getid;")
	m := k.reply()
	if m == nil || m.Value("rc") == "0" {
		t.Fatalf("garbled length: reply %+v", m)
	}
	if !k.c.isClosed() {
		t.Fatal("connection not closed after a garbled length")
	}
}

func TestValuesLongerThan1KiB(t *testing.T) {
	w := newWorld(t, 2, 1, withValMax(64<<10))
	a, b := w.task(0), w.task(1)
	a.init1()
	b.init2()
	long := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	a.send("cmd=get_maxes")
	a.expect("cmd=maxes rc=0 vallen_max=65536")
	a.send("cmd=put key=big value=" + long)
	a.expect("cmd=put_result rc=0")
	a.send("cmd=barrier_in")
	b.send("cmd=kvs-fence;")
	a.expect("cmd=barrier_out rc=0")
	b.expect("cmd=kvs-fence-response;rc=0;")
	b.send("cmd=kvs-get;jobid=job-1;key=big;")
	m := b.expect("cmd=kvs-get-response;rc=0;found=TRUE;")
	if m.Value("value") != long {
		t.Fatalf("value of %d bytes came back as %d", len(long), len(m.Value("value")))
	}
}

// Mixed versions on one job, and a request split across many reads.
func TestMixedVersionsAndFragments(t *testing.T) {
	w := newWorld(t, 2, 1)
	a, b := w.task(0), w.task(1)
	for _, c := range []byte("cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_appnum\n") {
		a.s.Feed([]byte{c})
	}
	a.expect("cmd=response_to_init rc=0")
	a.expect("cmd=appnum rc=0 appnum=0")
	b.init2()
	a.send("cmd=put key=x value=1")
	a.expect("cmd=put_result rc=0")
	a.send("cmd=barrier_in")
	b.send("cmd=kvs-fence;")
	a.expect("cmd=barrier_out rc=0")
	b.expect("cmd=kvs-fence-response;rc=0;")
	b.send("cmd=kvs-get;jobid=job-1;key=x;")
	b.expect("cmd=kvs-get-response;rc=0;found=TRUE;value=1;")
}

func TestGroupBarrier(t *testing.T) {
	w := newWorld(t, 4, 2)
	w.init12()
	// NODE barrier completes per node, without the backend.
	w.task(0).send("cmd=barrier_in group=NODE:5")
	w.task(1).send("cmd=barrier_in group=NODE:5")
	w.task(0).expect("cmd=barrier_out rc=0 tag=5")
	w.task(1).expect("cmd=barrier_out rc=0 tag=5")
	// A rank-list barrier across nodes.
	w.task(1).send("cmd=barrier_in group=1,2:7")
	w.task(1).silent()
	w.task(2).send("cmd=barrier_in group=1,2:7")
	w.task(1).expect("cmd=barrier_out rc=0 tag=7")
	w.task(2).expect("cmd=barrier_out rc=0 tag=7")
	// WORLD:0 is the plain world barrier: ranks meet in it whether or not
	// they name it, and only those that named it get the tag back.
	for _, k := range w.tasks {
		if k.rank%2 == 0 {
			k.send("cmd=barrier_in group=WORLD:0")
		} else {
			k.send("cmd=barrier_in")
		}
	}
	for _, k := range w.tasks {
		m := k.expect("cmd=barrier_out rc=0")
		if named := k.rank%2 == 0; m.Has("tag") != named {
			t.Errorf("rank %d (group named: %v): reply %+v", k.rank, named, m.Args)
		}
	}
}

func TestProcessMapping(t *testing.T) {
	for _, tc := range []struct {
		nodes []int32
		max   int
		want  string
	}{
		{[]int32{0, 0, 0, 0}, 1024, "(vector,(0,1,4))"},
		{[]int32{0, 0, 1, 1}, 1024, "(vector,(0,2,2))"},
		{[]int32{0, 1, 0, 1}, 1024, "(vector,(0,2,1),(0,2,1))"},
		{[]int32{0, 0, 0, 1}, 1024, "(vector,(0,1,3),(1,1,1))"},
		{[]int32{0, 1, 0, 1}, 10, ""},
	} {
		if got := processMapping(tc.nodes, tc.max); got != tc.want {
			t.Errorf("processMapping(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}

// The shim serves tasks while its backend starts: local requests are
// answered at once, requests that need the backend wait for it.
func TestBackendArrivesLater(t *testing.T) {
	late, lb := withLateBackend(false, &plugin.BackendInfo{Name: "late", Capabilities: []string{plugin.CapPublish}},
		plugin.Info{Key: "PMI_hwloc_xmlfile", Value: "/tmp/topo.xml"}, plugin.Info{Key: "universeSize", Value: "99"})
	w := newWorld(t, 1, 1, late)
	k := w.task(0)
	k.init2()
	k.send("cmd=kvs-put;key=a;value=b;")
	k.expect("cmd=kvs-put-response;rc=0;")
	k.send("cmd=kvs-fence;")
	k.expect("cmd=kvs-fence-response;rc=0;")
	k.send("cmd=name-publish;name=svc;port=p;infokeycount=0;")
	k.silent()
	k.send("cmd=info-getjobattr;key=PMI_hwloc_xmlfile;")
	k.silent()
	lb.up()
	// Both waited for the backend; they may be answered in either order.
	got := map[string]*wire.Message{}
	for i := 0; i < 2; i++ {
		m := k.reply()
		if m == nil {
			t.Fatal("a request that waited for the backend was not answered")
		}
		got[m.Cmd] = m
	}
	checkMsg(t, 0, got["name-publish-response"], "cmd=name-publish-response;rc=0;")
	checkMsg(t, 0, got["info-getjobattr-response"], "cmd=info-getjobattr-response;rc=0;found=TRUE;value=/tmp/topo.xml;")
	// The job's own attributes win over the backend's.
	k.send("cmd=info-getjobattr;key=universeSize;")
	k.expect("cmd=info-getjobattr-response;rc=0;found=TRUE;value=1;")
	k.send("cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=0;infokeycount=0;")
	m := k.expect("cmd=spawn-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), `late does not provide spawn`) {
		t.Fatalf("errmsg = %q", m.Value("errmsg"))
	}
}

func TestBackendThatNeverStarts(t *testing.T) {
	w := newWorld(t, 1, 1, func(c *jobSetup) {
		c.backend = func(plugin.Full) *Backend {
			b := NewBackend("gopmi-rm-x", nil)
			b.Fail(fmt.Errorf("gopmi-rm-x exited: %w", plugin.ErrBackendGone))
			return b
		}
	})
	k := w.task(0)
	k.init2()
	k.send("cmd=name-lookup;name=svc;infokeycount=0;")
	m := k.expect("cmd=name-lookup-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), "backend not available: gopmi-rm-x exited") {
		t.Fatalf("errmsg = %q", m.Value("errmsg"))
	}
}

// A request at the backend gate waits no longer than its deadline when
// the host never says whether the backend came up.
func TestGateDeadline(t *testing.T) {
	clk := crew.NewFake()
	late, lb := withLateBackend(false, &plugin.BackendInfo{Name: "late", Capabilities: []string{plugin.CapPublish}})
	w := newWorld(t, 1, 1, late, withClock(clk), withTimeouts(Timeouts{Backend: 10 * time.Second}))
	k := w.task(0)
	k.init2()
	k.send("cmd=name-publish;name=svc;port=p;infokeycount=0;")
	k.silent()
	if !lb.asked {
		t.Fatal("the name service did not ask for the backend")
	}
	clk.Advance(10*time.Second + grace - time.Millisecond)
	k.silent()
	clk.Advance(time.Millisecond)
	m := k.expect("cmd=name-publish-response;rc=-1;")
	if !strings.Contains(m.Value("errmsg"), "waiting for fake to start: no answer within 15s") {
		t.Fatalf("errmsg = %q", m.Value("errmsg"))
	}
	// A backend that comes up afterwards serves the next request.
	lb.up()
	k.send("cmd=name-publish;name=svc;port=p;infokeycount=0;")
	k.expect("cmd=name-publish-response;rc=0;")
}

// The job's end answers what waits at the gate and leaves nothing for
// Shutdown to wait for; an abort's report still reaches the backend once
// it is up.
func TestGateAtJobEnd(t *testing.T) {
	late, lb := withLateBackend(false, &plugin.BackendInfo{Name: "late", Capabilities: []string{plugin.CapPublish}})
	w := newWorld(t, 2, 1, late)
	a, b := w.task(0), w.task(1)
	a.init2()
	b.init2()
	a.send("cmd=name-lookup;name=svc;infokeycount=0;")
	a.silent()
	b.send("cmd=abort;isworld=TRUE;msg=boom;")
	a.expect("cmd=name-lookup-response;rc=-1;found=FALSE;")
	if res := w.waitDone(0); !res.Aborted {
		t.Fatalf("result %+v", res)
	}
	if aborts, _, _ := w.rm.snapshot(); len(aborts) != 0 {
		t.Fatalf("aborts before the backend is up: %+v", aborts)
	}
	lb.up()
	w.check("the abort reached the backend", func() bool {
		aborts, _, _ := w.rm.snapshot()
		return len(aborts) == 1 && aborts[0].Message == "boom"
	})
	// Nothing is left waiting at the gate: the gate's own deadline (the
	// default 30 s) is far beyond waitFor.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := w.job(0).Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// Apps that list their ranks (srun --multi-prog "0,2 a; 1,3 b") give
// each rank its app's index as its appnum, over PMI-1 and PMI-2.
func TestAppnumOfListedRanks(t *testing.T) {
	apps := []plugin.App{{FirstRank: 0, Size: 2, Cmd: "a", Ranks: []int32{0, 2}}, {FirstRank: 1, Size: 2, Cmd: "b", Ranks: []int32{1, 3}}}
	w := newWorld(t, 4, 2, func(c *jobSetup) { c.Job.Apps = apps })
	for r, want := range []string{"0", "1"} {
		k := w.task(r)
		k.init1()
		k.send("cmd=get_appnum")
		k.expect("cmd=appnum rc=0 appnum=" + want)
	}
	for r, want := range map[int]string{2: "0", 3: "1"} {
		if m := w.task(r).init2(); m.Value("appnum") != want {
			t.Errorf("rank %d: fullinit %+v, want appnum=%s", r, m.Args, want)
		}
	}
}

// drainingRM is a backend in the host's process that passes other nodes'
// answers through it: its DrainBeforeFinalize returns once gate closes.
type drainingRM struct {
	plugin.Full
	gate    chan struct{}
	drained atomic.Int32
}

func (d *drainingRM) DrainBeforeFinalize(ctx context.Context) {
	select {
	case <-d.gate:
	case <-ctx.Done():
	}
	d.drained.Add(1)
}

// A rank's finalize is answered only once an in-process backend that
// passes other nodes' answers through it (a fence tree's interior node)
// drained them: the rank's exit must not end the process under them.
func TestFinalizeWaitsForTheBackendsDrain(t *testing.T) {
	var d *drainingRM
	w := newWorld(t, 1, 1, func(c *jobSetup) {
		c.backend = func(rm plugin.Full) *Backend {
			d = &drainingRM{Full: rm, gate: make(chan struct{})}
			return ReadyBackend(d, &plugin.BackendInfo{Name: "fake"}, nil)
		}
	})
	a := w.task(0)
	a.init1()
	a.send("cmd=finalize")
	// The drain holds its goroutine, so the job is not quiet: look
	// for an answer after a while instead.
	time.Sleep(50 * time.Millisecond)
	if m := a.c.take(); m != nil {
		t.Fatalf("finalize answered before the backend drained: %s %+v", m.Cmd, m.Args)
	}
	close(d.gate)
	a.expect("cmd=finalize_ack rc=0")
	if n := d.drained.Load(); n != 1 {
		t.Errorf("drained %d times, want once", n)
	}
	a.s.Close(nil)
}
