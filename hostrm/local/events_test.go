package local

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// A job hears the clients' events kept after it was made, not its
// elders' old news; a watcher that fell behind the kept events is told
// it missed some; an event of the node alone is never kept.
func TestAwaitEvents(t *testing.T) {
	ctx := context.Background()
	u := NewUniverse(UniverseOptions{Prefix: "ev"})
	defer u.Close()
	newJob := func() string {
		spec, err := u.NewJob([]AppSpec{{Path: "/bin/app", Procs: 2}}, "", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return spec.Job.Nspace
	}
	notify := func(src string, r plugin.Range, i int) {
		if err := u.NotifyEvent(ctx, &plugin.EventRequest{Code: "pmix:-1007", Source: plugin.Proc{Nspace: src, Rank: 0}, Range: r,
			Info: []plugin.Info{{Key: "i", Value: strconv.Itoa(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	await := func(ns string, after uint64) *plugin.AwaitEventsResponse {
		resp, err := u.AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: ns, After: after})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a := newJob()
	notify(a, plugin.RangeGlobal, 1)
	notify(a, plugin.RangeLocal, 2)
	b := newJob()
	if got := await(a, 0); len(got.Events) != 1 || got.Events[0].Info[0].Value != "1" || got.Missed {
		t.Errorf("job a heard %+v, want its global event alone (the local one is not kept)", got)
	}
	if got := await(b, 0); len(got.Events) != 0 || got.Missed {
		t.Errorf("job b, made after the event, heard %+v, want nothing", got)
	}
	notify(a, plugin.RangeNamespace, 3)
	if got := await(b, 0); len(got.Events) != 0 {
		t.Errorf("job b heard job a's event of range namespace: %+v", got)
	}
	if got := await(a, ^uint64(0)); len(got.Events) != 0 || got.Missed {
		t.Errorf("a watcher past every event got %+v", got)
	}
	for i := range keptEvents + 10 {
		notify(a, plugin.RangeNamespace, 100+i)
	}
	// A waiting watcher ends with its job's abort, at once.
	done := make(chan error, 1)
	go func() {
		_, err := u.AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: b, After: ^uint64(0), Timeout: time.Minute})
		done <- err
	}()
	if err := u.Abort(ctx, &plugin.AbortRequest{Proc: plugin.Proc{Nspace: b, Rank: 0}, Status: 3, Message: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, plugin.ErrAborted) {
			t.Errorf("a watcher of an aborted job: %v, want ErrAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watcher of an aborted job still waits")
	}
	got := await(a, 0)
	if !got.Missed || len(got.Events) != keptEvents || got.Events[len(got.Events)-1].Info[0].Value != strconv.Itoa(100+keptEvents+9) {
		t.Errorf("after %d more events: missed %v, %d events; want missed and the last %d", keptEvents+10, got.Missed, len(got.Events), keptEvents)
	}
}
