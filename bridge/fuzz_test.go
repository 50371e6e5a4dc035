package bridge

import (
	"strings"
	"testing"
)

// FuzzSessions drives a job of 4 ranks on 2 nodes, plus a PMI_PORT
// connection of the job's user and one of a stranger, with random bytes
// cut into chunks and dealt to the connections: every reply must frame and
// parse as its client reads it (conn.take panics when not), nothing may
// panic or hang, and the jobs must shut down.
//
// The input is a sequence of operations: one byte picks the connection
// (its low 3 bits; connection 6 closes the one picked by the next byte),
// one byte is the chunk's length, then the chunk.
func FuzzSessions(f *testing.F) {
	for _, seed := range fuzzSessionSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newWorld(t, 4, 2, func(c *jobSetup) { c.PortSecret = "s"; c.Limits.KVSMax = 1 << 16 })
		port := []*tsk{
			{t: t, q: w.q, rank: -1, c: newConn()},
			{t: t, q: w.q, rank: -1, c: newConn()},
		}
		port[0].s = w.job(0).AttachPort(port[0].c, owner)
		port[1].s = w.job(1).AttachPort(port[1].c, stranger)
		all := append(append([]*tsk(nil), w.tasks...), port...)
		closed := make([]bool, len(all))
		for len(data) >= 2 {
			pick, n := int(data[0]&7), int(data[1])
			data = data[2:]
			if pick == 6 {
				if i := n % len(all); !closed[i] {
					closed[i] = true
					all[i].s.Close(nil)
				}
				continue
			}
			if pick >= len(all) {
				pick %= len(all)
			}
			n = min(n, len(data))
			chunk := data[:n]
			data = data[n:]
			if !closed[pick] {
				all[pick].s.Feed(chunk)
			}
			// Read what was answered so far, as a client would;
			// the version it reads with follows what it sent.
			k := all[pick]
			if k.s.codec().version() == 2 {
				k.c.mu.Lock()
				if k.c.version != 2 {
					k.c.version = 2
					k.c.buf = nil // the init reply was PMI-1
				}
				k.c.mu.Unlock()
			}
			for k.c.take() != nil {
			}
		}
		w.q.wait(t)
	})
}

func fuzzSessionSeeds() [][]byte {
	op := func(conn byte, s string) []byte { return append([]byte{conn, byte(len(s))}, s...) }
	frame := func(s string) string { return strings.Repeat(" ", 6-len(itoa(len(s)))) + itoa(len(s)) + s }
	var seeds [][]byte
	var b []byte
	b = append(b, op(0, "cmd=init pmi_version=1 pmi_subversion=1\n")...)
	b = append(b, op(1, "cmd=init pmi_version=1 pmi_subversion=1\n")...)
	b = append(b, op(0, "cmd=put kvsname=job-1 key=a value=b\ncmd=create_kvs\n")...)
	b = append(b, op(0, "cmd=barrier_in\n")...)
	b = append(b, op(1, "cmd=barrier_in\ncmd=get kvsname=job-1 key=a\n")...)
	b = append(b, op(1, "cmd=getbyidx kvsname=job-1 idx=0\n")...)
	seeds = append(seeds, b)
	b = nil
	b = append(b, op(2, "cmd=init pmi_version=2 pmi_subversion=0\n")...)
	b = append(b, op(2, frame("cmd=fullinit;pmirank=2;"))...)
	b = append(b, op(2, frame("cmd=kvs-put;key=x;value=y;"))...)
	b = append(b, op(2, frame("cmd=kvs-fence;"))...)
	b = append(b, op(6, "\x02")...)
	seeds = append(seeds, b)
	b = nil
	b = append(b, op(4, "cmd=initack pmiid=1\n")...)
	b = append(b, op(5, "cmd=init pmi_version=2 pmi_subversion=0\n")...)
	b = append(b, op(5, frame("cmd=fullinit;pmirank=3;authtype=challenge-sha256;"))...)
	b = append(b, op(5, frame("cmd=auth-response-complete;authinfo=00;"))...)
	seeds = append(seeds, b)
	return seeds
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
