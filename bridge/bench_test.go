package bridge

import (
	"testing"
)

// discard is a task connection that only counts what it is sent.
type discard struct{ bytes int }

func (d *discard) Send(b []byte) error { d.bytes += len(b); return nil }
func (d *discard) Close() error        { return nil }

// BenchmarkRequests is the engine's own cost of a PMI-2 task's local
// requests, a get of a preput key and a job attribute, from the bytes
// read to the reply handed to the connection: what a node's server
// spends beyond its system calls.
func BenchmarkRequests(b *testing.B) {
	w := newWorldRM(b, newFakeRM(), 1, 1, false, withPreput("pre", "a-value-of-some-forty-bytes-0123456789"))
	d := &discard{}
	s, err := w.jobs[0].Attach(0, d)
	if err != nil {
		b.Fatal(err)
	}
	s.Feed([]byte("cmd=init pmi_version=2 pmi_subversion=0\n"))
	s.Feed(frame2("cmd=fullinit;pmirank=0;"))
	get := frame2("cmd=kvs-get;jobid=job-1;srcid=0;key=pre;")
	attr := frame2("cmd=info-getjobattr;key=PMI_process_mapping;")
	sent := d.bytes
	b.ReportAllocs()
	for b.Loop() {
		s.Feed(get)
		s.Feed(attr)
	}
	if d.bytes == sent {
		b.Fatal("no replies")
	}
}
