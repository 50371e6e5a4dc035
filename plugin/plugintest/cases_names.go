package plugintest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

func testNameService(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	// Keys carry the namespace: names may be visible to every job.
	key := "service-" + e.job.Nspace
	pub := &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}}
	if err := e.nodes[0].Publish(ctx, pub); err != nil {
		t.Fatalf("Publish(%s): %v", key, err)
	}
	dup := &plugin.PublishRequest{Proc: e.proc(2), Data: []plugin.Info{{Key: key, Value: "port-2"}}}
	if err := e.nodes[1].Publish(ctx, dup); !errors.Is(err, plugin.ErrAlreadyExists) {
		t.Errorf("Publish(%s) again: %v; want an error wrapping plugin.ErrAlreadyExists", key, err)
	}

	// From the other node, as a daemon-style backend must allow.
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}})
	if err != nil {
		t.Fatalf("Lookup(%s): %v", key, err)
	}
	want := []plugin.Published{{Key: key, Value: "port-0", Publisher: e.proc(0)}}
	if !slices.Equal(resp.Data, want) {
		t.Errorf("Lookup(%s) = %+v; want %+v", key, resp.Data, want)
	}

	missing := "missing-" + e.job.Nspace
	if _, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(0), Keys: []string{missing}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) of a name never published: %v; want an error wrapping plugin.ErrNotFound", missing, err)
	}

	// A waiting lookup gets a name published after it started (or, if the
	// publish wins the race, before: both must work).
	later := "later-" + e.job.Nspace
	type result struct {
		resp *plugin.LookupResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		r, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(3), Keys: []string{later}, Wait: true, Timeout: 2 * e.h.Timeout})
		got <- result{r, err}
	}()
	published := make(chan error, 1)
	timer := time.AfterFunc(e.h.Timeout/10, func() {
		published <- e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(1), Data: []plugin.Info{{Key: later, Value: "port-1"}}})
	})
	defer timer.Stop()
	if err := <-published; err != nil {
		t.Fatalf("Publish(%s): %v", later, err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiting Lookup(%s): %v", later, r.err)
		}
		want := []plugin.Published{{Key: later, Value: "port-1", Publisher: e.proc(1)}}
		if !slices.Equal(r.resp.Data, want) {
			t.Errorf("waiting Lookup(%s) = %+v; want %+v", later, r.resp.Data, want)
		}
	case <-ctx.Done():
		t.Fatalf("waiting Lookup(%s) did not return", later)
	}

	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}}); err != nil {
		t.Fatalf("Unpublish(%s): %v", key, err)
	}
	if _, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) after Unpublish: %v; want an error wrapping plugin.ErrNotFound", key, err)
	}
	// Leave nothing behind in a long-lived daemon.
	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(1), Keys: []string{later}}); err != nil {
		t.Errorf("Unpublish(%s): %v", later, err)
	}
}

// unknownInfo is a directive no backend knows.
const unknownInfo = "gopmi.conformance.no-such-directive"

// testNameUnknownInfo: a directive the backend does not know is refused
// with ErrNotSupported naming it, by Publish (which then publishes
// nothing), Lookup and Unpublish; none is silently ignored.
func testNameUnknownInfo(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	key := "directive-" + e.job.Nspace
	info := []plugin.Info{{Key: unknownInfo, Value: "1"}}
	refused := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, plugin.ErrNotSupported) || !strings.Contains(err.Error(), unknownInfo) {
			t.Errorf("%s with info key %q: %v; want an error wrapping plugin.ErrNotSupported that names the key", call, unknownInfo, err)
		}
	}
	refused("Publish", e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port"}}, Info: info}))
	if resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) after a refused Publish: %+v, %v; want an error wrapping plugin.ErrNotFound", key, resp, err)
		_ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}})
	}
	_, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}, Info: info})
	refused("Lookup", err)
	refused("Unpublish", e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}, Info: info}))
}

// publishOrRefuse publishes req. A backend may refuse a Range or
// Persistence it does not implement, with ErrNotSupported: then the case
// has nothing more to check and publishOrRefuse reports false.
func publishOrRefuse(t *testing.T, ctx context.Context, b plugin.Full, what string, req *plugin.PublishRequest) bool {
	t.Helper()
	err := b.Publish(ctx, req)
	switch {
	case err == nil:
		return true
	case errors.Is(err, plugin.ErrNotSupported):
		t.Logf("the backend refuses %s, as it may: %v", what, err)
		return false
	default:
		t.Fatalf("Publish with %s: %v; want success, or an error wrapping plugin.ErrNotSupported", what, err)
		return false
	}
}

// testNamePersistFirstRead: a PersistFirstRead name is gone after the
// first lookup that returns it.
func testNamePersistFirstRead(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	key := "once-" + e.job.Nspace
	if !publishOrRefuse(t, ctx, e.nodes[0], "PersistFirstRead", &plugin.PublishRequest{
		Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}, Persistence: plugin.PersistFirstRead}) {
		return
	}
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}})
	if err != nil || len(resp.Data) != 1 || resp.Data[0].Value != "port-0" {
		t.Fatalf("first Lookup(%s) of a PersistFirstRead name: %+v, %v; want port-0", key, resp, err)
	}
	if resp, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(1), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("second Lookup(%s) of a PersistFirstRead name: %+v, %v; want an error wrapping plugin.ErrNotFound: the first read removes it", key, resp, err)
		_ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}})
	}
}

// testNameRangeNamespace: a RangeNamespace name is seen by its job, on
// every node, and by no other job.
func testNameRangeNamespace(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	other := newEnv(t, e.h, e.overGRPC)
	key := "job-only-" + e.job.Nspace
	if !publishOrRefuse(t, ctx, e.nodes[0], "RangeNamespace", &plugin.PublishRequest{
		Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}, Range: plugin.RangeNamespace}) {
		return
	}
	defer func() { _ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}}) }()
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}, Range: plugin.RangeNamespace})
	if err != nil || len(resp.Data) != 1 || resp.Data[0].Value != "port-0" {
		t.Errorf("Lookup(%s) by its own job on the other node: %+v, %v; want port-0", key, resp, err)
	}
	resp, err = other.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: other.proc(2), Keys: []string{key}})
	if !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) by job %s, another job: %+v, %v; want an error wrapping plugin.ErrNotFound: the name's range is its publisher's job", key, other.job.Nspace, resp, err)
	}
}

// testUnpublishWithoutKeys: an Unpublish that names no key removes every
// name its Proc published, and only those.
func testUnpublishWithoutKeys(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	mine := []string{"all-a-" + e.job.Nspace, "all-b-" + e.job.Nspace}
	theirs := "all-c-" + e.job.Nspace
	if err := e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: mine[0], Value: "a"}, {Key: mine[1], Value: "b"}}}); err != nil {
		t.Fatalf("Publish(%v): %v", mine, err)
	}
	if err := e.nodes[1].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(2), Data: []plugin.Info{{Key: theirs, Value: "c"}}}); err != nil {
		t.Fatalf("Publish(%s): %v", theirs, err)
	}
	defer func() {
		_ = e.nodes[1].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(2), Keys: []string{theirs}})
	}()
	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0)}); err != nil {
		t.Fatalf("Unpublish of every name of %s: %v", e.proc(0), err)
	}
	for _, k := range mine {
		if resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(3), Keys: []string{k}}); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("Lookup(%s) after its publisher unpublished without keys: %+v, %v; want an error wrapping plugin.ErrNotFound", k, resp, err)
		}
	}
	if resp, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(1), Keys: []string{theirs}}); err != nil || len(resp.Data) != 1 {
		t.Errorf("Lookup(%s), published by %s, after %s unpublished without keys: %+v, %v; want it still published", theirs, e.proc(2), e.proc(0), resp, err)
	}
}

// testLookupWaitTimeout: a waiting lookup of a name nobody publishes
// fails with ErrTimeout naming the name, after about its Timeout.
func testLookupWaitTimeout(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+time.Second)
	defer cancel()
	never := "never-" + e.job.Nspace
	start := time.Now()
	_, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(0), Keys: []string{never}, Wait: true, Timeout: e.h.Timeout})
	switch {
	case ctx.Err() != nil:
		t.Fatalf("waiting Lookup(%s) returned only when its context ended after %s (%v); want ErrTimeout after its Timeout %s",
			never, time.Since(start).Round(time.Millisecond), err, e.h.Timeout)
	case !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), never):
		t.Errorf("waiting Lookup(%s) of a name nobody publishes: %v; want an error wrapping plugin.ErrTimeout that names it", never, err)
	}
}
