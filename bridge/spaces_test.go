package bridge

import (
	"fmt"
	"strings"
	"testing"
)

// The requests below are written as MPICH's old simple PMI-1 client wrote
// them (simple_pmi.c: PMI_KVS_Create, PMI_KVS_Destroy, PMII_iter), and
// its replies are read as it read them: cmd=, then rc=, nextidx=, key=,
// val= or reason=.

// iterate walks a space with getbyidx as PMI_KVS_Iter_first/next did and
// returns key=val pairs.
func iterate(k *tsk, kvsname string) []string {
	k.t.Helper()
	var got []string
	for idx := 0; ; {
		k.send(fmt.Sprintf("cmd=getbyidx kvsname=%s idx=%d", kvsname, idx))
		m := k.reply()
		if m == nil || m.Cmd != "getbyidx_results" {
			k.t.Fatalf("getbyidx %s %d: %+v", kvsname, idx, m)
		}
		if m.Value("rc") != "0" {
			if m.Value("reason") != "no_more_keyvals" {
				k.t.Fatalf("getbyidx %s %d: %+v", kvsname, idx, m.Args)
			}
			return got
		}
		got = append(got, m.Value("key")+"="+m.Value("val"))
		next := m.Value("nextidx")
		if next != fmt.Sprint(idx+1) {
			k.t.Fatalf("nextidx %s after %d", next, idx)
		}
		idx++
	}
}

func barrier(ks ...*tsk) {
	for _, k := range ks {
		k.send("cmd=barrier_in")
	}
	for _, k := range ks {
		k.expect("cmd=barrier_out")
	}
}

// TestLegacyKVS: create_kvs makes a space that ranks on every node put to,
// get from and iterate by name after a barrier; getbyidx iterates the
// job's own KVS in key order without the spaces' keys; destroy_kvs removes
// a space.
func TestLegacyKVS(t *testing.T) {
	w := newWorld(t, 2, 2, withPreput("a-preput", "p"))
	a, b := w.task(0), w.task(1)
	a.init1()
	b.init1()

	a.send("cmd=create_kvs")
	m := a.expect("cmd=newkvs kvsname=*")
	space := m.Value("kvsname")
	if space != "job-1-kvs-0.0" {
		t.Fatalf("kvsname %q", space)
	}
	a.send("cmd=create_kvs")
	if next := a.expect("cmd=newkvs kvsname=*").Value("kvsname"); next == space {
		t.Fatalf("create_kvs gave %s twice", space)
	}

	a.send("cmd=put kvsname=job-1 key=zeta value=z0")
	a.expect("cmd=put_result rc=0")
	a.send("cmd=put kvsname=job-1 key=alpha value=a0")
	a.expect("cmd=put_result rc=0")
	a.send("cmd=put kvsname=" + space + " key=alpha value=in-space-0")
	a.expect("cmd=put_result rc=0")
	// Rank 1, on another node, was never told the space exists: its name
	// says it is the job's.
	b.send("cmd=put kvsname=" + space + " key=beta value=in-space-1")
	b.expect("cmd=put_result rc=0")
	barrier(a, b)

	b.send("cmd=get kvsname=" + space + " key=alpha")
	b.expect("cmd=get_result rc=0 value=in-space-0")
	b.send("cmd=get kvsname=job-1 key=alpha")
	b.expect("cmd=get_result rc=0 value=a0")
	b.send("cmd=get kvsname=" + space + " key=zeta")
	if msg := b.expect("cmd=get_result rc=-1").Value("msg"); !strings.Contains(msg, "zeta_(in_kvs_"+space+")") {
		t.Errorf("msg %q", msg)
	}

	for _, k := range []*tsk{a, b} {
		if got := strings.Join(iterate(k, space), " "); got != "alpha=in-space-0 beta=in-space-1" {
			t.Errorf("rank %d: space holds %s", k.rank, got)
		}
		if got := strings.Join(iterate(k, "job-1"), " "); got != "a-preput=p alpha=a0 zeta=z0" {
			t.Errorf("rank %d: job KVS holds %s", k.rank, got)
		}
	}
	a.send("cmd=getbyidx kvsname=job-1 idx=-1")
	a.expect("cmd=getbyidx_results rc=3")
	a.send("cmd=getbyidx kvsname=job-2 idx=0")
	a.expect("cmd=getbyidx_results rc=3")

	a.send("cmd=destroy_kvs kvsname=job-1")
	a.expect("cmd=kvs_destroyed rc=3")
	a.send("cmd=destroy_kvs kvsname=" + space)
	a.expect("cmd=kvs_destroyed rc=0")
	for _, req := range []string{"cmd=get kvsname=" + space + " key=alpha", "cmd=put kvsname=" + space + " key=x value=y",
		"cmd=getbyidx kvsname=" + space + " idx=0", "cmd=destroy_kvs kvsname=" + space} {
		a.send(req)
		if m := a.reply(); m == nil || m.Value("rc") == "0" || !strings.Contains(m.Value("msg"), "was_destroyed") {
			t.Errorf("%s after destroy_kvs: %+v", req, m)
		}
	}
	// A client cannot reach a space's keys through the job's own KVS.
	w2 := newWorld(t, 1, 1)
	c := w2.task(0)
	c.init2()
	c.send("cmd=kvs-put;key=\x00job-1-kvs-0.0\x00alpha;value=v;")
	c.expect("cmd=kvs-put-response;rc=4;")
}

// TestLegacyKVSBounded: a rank makes at most maxSpacesPerRank spaces, and
// iteration refuses what it cannot answer whole.
func TestLegacyKVSBounded(t *testing.T) {
	w := newWorld(t, 1, 1)
	k := w.task(0)
	k.init1()
	for i := 0; i < maxSpacesPerRank; i++ {
		k.send("cmd=create_kvs")
		k.expect("cmd=newkvs rc=0")
	}
	k.send("cmd=create_kvs")
	k.expect("cmd=newkvs rc=-1")
	k.send(fmt.Sprintf("cmd=put kvsname=job-1-kvs-0.%d key=k value=v", maxSpacesPerRank))
	k.expect("cmd=put_result rc=3")

	m := newWorld(t, 2, 2, withMode(FenceModex))
	x := m.task(0)
	x.init1()
	x.send("cmd=getbyidx kvsname=job-1 idx=0")
	if msg := x.expect("cmd=getbyidx_results rc=-1").Value("msg"); !strings.Contains(msg, "modex") {
		t.Errorf("msg %q", msg)
	}
}

// TestKVSLimit: a node holds at most Limits.KVSMax bytes of records for a
// job: a put past it is refused naming the limit, and a fence that would
// bring more from other nodes fails instead of holding it.
func TestKVSLimit(t *testing.T) {
	limit := func(n int64) jobOpt { return func(c *jobSetup) { c.Limits.KVSMax = n } }
	w := newWorld(t, 1, 1, limit(300))
	k := w.task(0)
	k.init1()
	val := strings.Repeat("v", 100)
	k.send("cmd=put kvsname=job-1 key=a value=" + val)
	k.expect("cmd=put_result rc=0")
	k.send("cmd=put kvsname=job-1 key=b value=" + val)
	k.expect("cmd=put_result rc=0")
	k.send("cmd=put kvsname=job-1 key=c value=" + val)
	m := k.expect("cmd=put_result rc=2")
	if msg := m.Value("msg"); !strings.Contains(msg, "limit_of_300_bytes_(-max-kvs)") {
		t.Errorf("msg %q", msg)
	}
	// What was put before stays and is committed.
	barrier(k)
	k.send("cmd=get kvsname=job-1 key=b")
	k.expect("cmd=get_result rc=0 value=" + val)
	// A key put again counts again.
	k.send("cmd=put kvsname=job-1 key=a value=" + val)
	k.expect("cmd=put_result rc=2")

	// Each node's puts fit; all of them together do not.
	w2 := newWorld(t, 2, 2, limit(300))
	a, b := w2.task(0), w2.task(1)
	a.init1()
	b.init1()
	a.send("cmd=put kvsname=job-1 key=a value=" + val)
	a.expect("cmd=put_result rc=0")
	a.send("cmd=put kvsname=job-1 key=a2 value=" + val)
	a.expect("cmd=put_result rc=0")
	b.send("cmd=put kvsname=job-1 key=b value=" + val)
	b.expect("cmd=put_result rc=0")
	b.send("cmd=put kvsname=job-1 key=b2 value=" + val)
	b.expect("cmd=put_result rc=0")
	a.send("cmd=barrier_in")
	b.send("cmd=barrier_in")
	for _, x := range []*tsk{a, b} {
		m := x.expect("cmd=barrier_out rc=-1")
		if msg := m.Value("msg"); !strings.Contains(msg, "more_than_its_limit_of_300_bytes") {
			t.Errorf("rank %d: msg %q", x.rank, msg)
		}
	}
}

// TestSingInit: a singleton's half of MPICH's singleton init, then its
// cmd=init and the empty put MPICH 4.0 sends when it cached none.
func TestSingInit(t *testing.T) {
	w := newWorld(t, 1, 1)
	k := w.task(0)
	k.send("cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=none")
	k.expect("cmd=singinit_info rc=0 versionok=yes stdio=no kvsname=job-1")
	k.init1()
	k.send("cmd=put kvsname=job-1 key= value=")
	k.expect("cmd=put_result rc=0")
	k.send("cmd=put kvsname=job-1 key= value=x")
	k.expect("cmd=put_result rc=4")
	k.send("cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=none")
	k.expect("cmd=singinit_info rc=-1")

	w2 := newWorld(t, 1, 1)
	x := w2.task(0)
	x.send("cmd=singinit pmi_version=2 pmi_subversion=0 authtype=none")
	x.expect("cmd=singinit_info rc=0 versionok=no")
	x.send("cmd=singinit pmi_version=1 pmi_subversion=1 authtype=munge")
	x.expect("cmd=singinit_info rc=-1")
}

// TestKVSHeldAcrossBarriers: node barriers' data, carried to the next
// world fence, is not counted twice once that fence brought it back: a
// job that fences many times holds what its store holds, not more.
func TestKVSHeldAcrossBarriers(t *testing.T) {
	w := newWorld(t, 4, 2)
	w.init12()
	val := strings.Repeat("v", 100)
	for round := 0; round < 5; round++ {
		for _, k := range w.tasks {
			k.send(fmt.Sprintf("cmd=put kvsname=job-1 key=k%d-%d value=%s", round, k.rank, val))
			k.expect("cmd=put_result rc=0")
		}
		for _, k := range w.tasks {
			k.send("cmd=barrier_in group=NODE:" + fmt.Sprint(round))
		}
		for _, k := range w.tasks {
			k.expect("cmd=barrier_out rc=0")
		}
		barrier(w.tasks...)
	}
	for n := range w.jobs {
		j := w.job(n)
		j.mu.Lock()
		held, stored := j.held, int64(len(j.store.AppendAll(nil)))
		j.mu.Unlock()
		if held > stored+stored/10 {
			t.Errorf("node %d holds %d bytes by its count, %d in its store", n, held, stored)
		}
	}
}
