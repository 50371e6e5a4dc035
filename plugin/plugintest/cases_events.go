package plugintest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/plugin"
)

// testEvents (capability "events"): a client's event of range namespace
// that node n0's host reports reaches a watcher on node n1, with its
// code, source, info and reporting node, numbered; a watcher past it
// waits its time-out and gets none, without an error; an event of the
// node alone (range local) is not kept.
func testEvents(t *testing.T, e *env) {
	if !e.has(plugin.CapEvents) {
		t.Skip(`the backend does not advertise "events"`)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	code := plugin.EventCode(plugin.EventClientPrefix + "-1007")
	local := plugin.EventRequest{Code: code, Source: e.proc(1), Range: plugin.RangeLocal, Node: e.job.Nodes[0].Name,
		Info: []plugin.Info{{Key: "conformance.word", Value: "local"}}}
	if err := e.nodes[0].NotifyEvent(ctx, &local); err != nil {
		t.Fatalf("NotifyEvent of range local: %v", err)
	}
	want := plugin.EventRequest{Code: code, Source: e.proc(0), Range: plugin.RangeNamespace, Node: e.job.Nodes[0].Name,
		Info: []plugin.Info{{Key: "conformance.word", Value: "hello"}}}
	// A watcher already waiting, as a host's is.
	got := make(chan *plugin.AwaitEventsResponse, 1)
	errs := make(chan error, 1)
	go func() {
		resp, err := e.nodes[1].AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: e.job.Nspace, Timeout: 4 * e.h.Timeout})
		got <- resp
		errs <- err
	}()
	if err := e.nodes[0].NotifyEvent(ctx, &want); err != nil {
		t.Fatalf("NotifyEvent: %v", err)
	}
	resp, err := <-got, <-errs
	if err != nil {
		t.Fatalf("AwaitEvents on node n1: %v%s", err, e.explain(err))
	}
	if len(resp.Events) != 1 {
		t.Fatalf("AwaitEvents on node n1 gave %d events, want the one of range namespace (not the local one): %+v", len(resp.Events), resp.Events)
	}
	ev := resp.Events[0]
	if ev.Seq == 0 {
		t.Errorf("the event's Seq is 0; events are numbered from 1")
	}
	if diff := cmp.Diff(want, ev.EventRequest); diff != "" {
		t.Errorf("the event as n1 got it (-reported +got):\n%s", diff)
	}
	short, cancelShort := context.WithTimeout(ctx, 4*e.h.Timeout+5*time.Second)
	defer cancelShort()
	resp, err = e.nodes[1].AwaitEvents(short, &plugin.AwaitEventsRequest{Nspace: e.job.Nspace, After: ev.Seq, Timeout: e.h.Timeout / 4})
	if err != nil || len(resp.Events) != 0 {
		t.Errorf("AwaitEvents after the last event: %+v, %v; want no events and no error once its time-out passed", resp, err)
	}
}
