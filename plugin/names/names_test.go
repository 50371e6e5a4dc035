package names

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func proc(ns string, r int32) plugin.Proc { return plugin.Proc{Nspace: ns, Rank: r} }

func asker(ns string, r int32, node, realm string) Asker {
	return Asker{Proc: proc(ns, r), Node: node, Realm: realm}
}

func pub(key, value string, rng plugin.Range, persist plugin.Persistence) *plugin.PublishRequest {
	return &plugin.PublishRequest{Data: []plugin.Info{{Key: key, Value: value}}, Range: rng, Persistence: persist}
}

func TestPublishConflicts(t *testing.T) {
	a0 := asker("a", 0, "n0", "")
	a1 := asker("a", 1, "n1", "")
	b0 := asker("b", 0, "n0", "")
	b1 := asker("b", 0, "n1", "")
	user2 := asker("a", 0, "n0", "1000")
	cases := []struct {
		name    string
		first   Asker
		firstRq *plugin.PublishRequest
		second  Asker
		rq      *plugin.PublishRequest
		want    error // nil: both published
	}{
		{"same key, whole run", a0, pub("k", "v", 0, 0), b0, pub("k", "w", 0, 0), plugin.ErrAlreadyExists},
		{"same key, another job's private name", a0, pub("k", "v", plugin.RangeNamespace, 0), b0, pub("k", "w", plugin.RangeNamespace, 0), nil},
		{"a job's name blocks the job's own", a0, pub("k", "v", plugin.RangeNamespace, 0), a1, pub("k", "w", plugin.RangeNamespace, 0), plugin.ErrAlreadyExists},
		{"a new global name would be seen by a job-private one's publisher", a0, pub("k", "v", plugin.RangeNamespace, 0), b0, pub("k", "w", plugin.RangeGlobal, 0), plugin.ErrAlreadyExists},
		{"node names on two nodes", a0, pub("k", "v", plugin.RangeLocal, 0), b1, pub("k", "w", plugin.RangeLocal, 0), nil},
		{"node names on one node", a0, pub("k", "v", plugin.RangeLocal, 0), b0, pub("k", "w", plugin.RangeLocal, 0), plugin.ErrAlreadyExists},
		{"another realm", a0, pub("k", "v", 0, 0), user2, pub("k", "w", 0, 0), nil},
		{"a retry", a0, pub("k", "v", 0, 0), a0, pub("k", "v", 0, 0), nil},
		{"the same process, another value", a0, pub("k", "v", 0, 0), a0, pub("k", "w", 0, 0), plugin.ErrAlreadyExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{Host: "test", Retries: true})
			if err := s.Publish(c.first, c.firstRq); err != nil {
				t.Fatalf("first publish: %v", err)
			}
			err := s.Publish(c.second, c.rq)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("second publish: %v; want success", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("second publish: %v; want %v", err, c.want)
			case c.want != nil && !strings.Contains(err.Error(), c.first.Proc.String()):
				t.Errorf("refusal %q does not name the first publisher %s", err, c.first.Proc)
			}
			wantNames := 2
			if c.want != nil || c.name == "a retry" {
				wantNames = 1
			}
			if got := len(s.Names(nil)); got != wantNames {
				t.Errorf("%d names held; want %d", got, wantNames)
			}
		})
	}
}

func TestPublishAllOrNone(t *testing.T) {
	s := New(Options{Host: "test"})
	a := asker("a", 0, "n0", "")
	if err := s.Publish(a, pub("taken", "v", 0, 0)); err != nil {
		t.Fatal(err)
	}
	req := &plugin.PublishRequest{Data: []plugin.Info{{Key: "free", Value: "1"}, {Key: "taken", Value: "2"}}}
	if err := s.Publish(asker("b", 0, "n0", ""), req); !errors.Is(err, plugin.ErrAlreadyExists) {
		t.Fatalf("publish with one taken key: %v", err)
	}
	if _, _, err := s.Take(a, []string{"free"}, false); err != nil {
		t.Fatal(err)
	}
	if got := s.Names(func(n *Name) bool { return n.Key == "free" }); len(got) != 0 {
		t.Errorf("a refused publish published %v", got)
	}
}

func TestCheckRefuses(t *testing.T) {
	s := New(Options{Host: "the test host"})
	a := asker("a", 0, "", "")
	cases := []struct {
		req  *plugin.PublishRequest
		want error
		says string
	}{
		{&plugin.PublishRequest{}, plugin.ErrInvalidArgument, "no names"},
		{pub("", "v", 0, 0), plugin.ErrInvalidArgument, "empty name"},
		{pub("k", "v", 9, 0), plugin.ErrNotSupported, "range 9 is not supported by the test host"},
		{pub("k", "v", 0, 9), plugin.ErrNotSupported, "persistence 9"},
		{&plugin.PublishRequest{Data: []plugin.Info{{Key: "k"}}, Info: []plugin.Info{{Key: "pmix.odd"}}}, plugin.ErrNotSupported, `"pmix.odd"`},
	}
	for _, c := range cases {
		err := s.Publish(a, c.req)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Publish(%+v) = %v; want %v saying %q", c.req, err, c.want, c.says)
		}
	}
}

func TestVisibility(t *testing.T) {
	s := New(Options{Host: "test"})
	must(t, s.Publish(asker("a", 0, "n0", ""), pub("job", "1", plugin.RangeNamespace, 0)))
	must(t, s.Publish(asker("a", 0, "n0", ""), pub("node", "2", plugin.RangeLocal, 0)))
	must(t, s.Publish(asker("a", 0, "n0", ""), pub("all", "3", 0, 0)))
	must(t, s.Publish(asker("a", 0, "n0", "other"), pub("mine", "4", 0, 0)))
	cases := []struct {
		who  Asker
		key  string
		sees bool
	}{
		{asker("a", 3, "n1", ""), "job", true},
		{asker("b", 0, "n0", ""), "job", false},
		{asker("b", 0, "n0", ""), "node", true},
		{asker("a", 1, "n1", ""), "node", false},
		{asker("a", 1, "", ""), "node", false},
		{asker("b", 0, "n9", ""), "all", true},
		{asker("b", 0, "n9", "other"), "all", false},
		{asker("z", 0, "", "other"), "mine", true},
	}
	for _, c := range cases {
		found, _, err := s.Take(c.who, []string{c.key}, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(found) == 1; got != c.sees {
			t.Errorf("%+v sees %q: %v; want %v", c.who, c.key, got, c.sees)
		}
	}
}

func TestAnotherRealmIsRefusedNotShown(t *testing.T) {
	s := New(Options{Host: "test", RealmNoun: "user"})
	must(t, s.Publish(asker("a", 0, "", "0"), pub("k", "v", 0, 0)))
	_, err := s.Lookup(context.Background(), asker("b", 0, "", "1000"), &plugin.LookupRequest{Keys: []string{"k"}}, nil)
	if !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "another user") {
		t.Errorf("lookup of another user's name: %v; want ErrPermission saying another user", err)
	}
	_, err = s.Unpublish(asker("b", 0, "", "1000"), &plugin.UnpublishRequest{Keys: []string{"k"}})
	if !errors.Is(err, plugin.ErrPermission) {
		t.Errorf("unpublish of another user's name: %v; want ErrPermission", err)
	}
	if len(s.Names(nil)) != 1 {
		t.Error("another user's unpublish removed the name")
	}
}

// TestAnotherRealmHidden: with Asker.Hidden, a key only another realm
// holds is not there for the asker (a lookup finds nothing, an unpublish
// returns it not found), and the host hears of each.
func TestAnotherRealmHidden(t *testing.T) {
	s := New(Options{Host: "test", RealmNoun: "user"})
	must(t, s.Publish(asker("a", 0, "", "0"), pub("k", "v", 0, 0)))
	var told []string
	b := asker("b", 0, "", "1000")
	b.Hidden = func(step, key string) { told = append(told, step+" "+key) }
	_, err := s.Lookup(context.Background(), b, &plugin.LookupRequest{Keys: []string{"k"}}, nil)
	if !errors.Is(err, plugin.ErrNotFound) || strings.Contains(err.Error(), "user") {
		t.Errorf("lookup of another user's name: %v; want ErrNotFound, as for no name", err)
	}
	notFound, err := s.Unpublish(b, &plugin.UnpublishRequest{Keys: []string{"k"}})
	if err != nil || len(notFound) != 1 || notFound[0] != "k" {
		t.Errorf("unpublish of another user's name: %v, %v; want k not found", notFound, err)
	}
	if len(s.Names(nil)) != 1 {
		t.Error("another user's unpublish removed the name")
	}
	if strings.Join(told, ",") != "lookup k,unpublish k" {
		t.Errorf("the host was told %q", told)
	}
}

func TestFirstRead(t *testing.T) {
	s := New(Options{Host: "test"})
	must(t, s.Publish(asker("a", 0, "", ""), pub("once", "v", 0, plugin.PersistFirstRead)))
	must(t, s.Publish(asker("a", 0, "", ""), pub("kept", "w", 0, 0)))
	ctx := context.Background()
	resp, err := s.Lookup(ctx, asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"once", "kept"}}, nil)
	if err != nil || len(resp.Data) != 2 {
		t.Fatalf("first lookup: %+v, %v", resp, err)
	}
	resp, err = s.Lookup(ctx, asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"once", "kept"}}, nil)
	if err != nil || !slices.Equal(resp.Data, []plugin.Published{{Key: "kept", Value: "w", Publisher: proc("a", 0)}}) {
		t.Fatalf("second lookup: %+v, %v; want only the name that is not read once", resp, err)
	}
	if _, err := s.Lookup(ctx, asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"once"}}, nil); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("third lookup of a first-read name: %v; want ErrNotFound", err)
	}
}

func TestWaitingLookup(t *testing.T) {
	s := New(Options{Host: "test"})
	ctx := context.Background()
	done := make(chan error, 1)
	var got *plugin.LookupResponse
	go func() {
		var err error
		got, err = s.Lookup(ctx, asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"x", "y"}, Wait: true, Timeout: time.Minute}, nil)
		done <- err
	}()
	must(t, s.Publish(asker("a", 0, "", ""), pub("x", "1", 0, 0)))
	select {
	case err := <-done:
		t.Fatalf("the lookup returned with one of its two keys: %+v, %v", got, err)
	case <-time.After(50 * time.Millisecond):
	}
	must(t, s.Publish(asker("a", 1, "", ""), pub("y", "2", 0, 0)))
	select {
	case err := <-done:
		if err != nil || len(got.Data) != 2 {
			t.Fatalf("waiting lookup: %+v, %v", got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting lookup did not see the names")
	}
}

func TestWaitingLookupEnds(t *testing.T) {
	s := New(Options{Host: "test"})
	t.Run("time-out names the missing keys", func(t *testing.T) {
		must(t, s.Publish(asker("a", 0, "", ""), pub("here", "1", 0, 0)))
		_, err := s.Lookup(context.Background(), asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"here", "gone"}, Wait: true, Timeout: 30 * time.Millisecond}, nil)
		if !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), "lookup of gone: not published within 30ms") {
			t.Errorf("lookup: %v; want ErrTimeout naming only the missing key", err)
		}
	})
	t.Run("the caller goes away", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := s.Lookup(ctx, asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"never"}, Wait: true}, nil)
		if !errors.Is(err, plugin.ErrAborted) {
			t.Errorf("lookup: %v; want ErrAborted", err)
		}
	})
	t.Run("the host's check ends it when woken", func(t *testing.T) {
		ended := make(chan struct{})
		check := func() error {
			select {
			case <-ended:
				return plugin.Errorf(plugin.ErrAborted, "job b ended")
			default:
				return nil
			}
		}
		time.AfterFunc(20*time.Millisecond, func() { close(ended); s.opts.Changes.Broadcast() })
		_, err := s.Lookup(context.Background(), asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"never"}, Wait: true, Timeout: time.Minute}, check)
		if !errors.Is(err, plugin.ErrAborted) || !strings.Contains(err.Error(), "job b ended") {
			t.Errorf("lookup: %v; want the check's error", err)
		}
	})
}

// Without Options.Retries a second publish of the same name by the same
// process is a duplicate, as PMIx has it.
func TestRetryIsDuplicateByDefault(t *testing.T) {
	s := New(Options{Host: "test"})
	a := asker("a", 0, "", "")
	must(t, s.Publish(a, pub("k", "v", 0, 0)))
	if err := s.Publish(a, pub("k", "v", 0, 0)); !errors.Is(err, plugin.ErrAlreadyExists) {
		t.Errorf("the same publish again: %v; want ErrAlreadyExists", err)
	}
}

// A waiting lookup ends when its host closes the name service's cond,
// also with no check of its own.
func TestWaitingLookupEndsWhenClosed(t *testing.T) {
	var c wake.Cond
	s := New(Options{Host: "test", Changes: &c})
	time.AfterFunc(20*time.Millisecond, c.Close)
	_, err := s.Lookup(context.Background(), asker("b", 0, "", ""), &plugin.LookupRequest{Keys: []string{"never"}, Wait: true, Timeout: time.Minute}, nil)
	if !errors.Is(err, plugin.ErrUnavailable) {
		t.Errorf("lookup: %v; want ErrUnavailable", err)
	}
}

func TestUnpublish(t *testing.T) {
	s := New(Options{Host: "test"})
	must(t, s.Publish(asker("a", 0, "", ""), &plugin.PublishRequest{Data: []plugin.Info{{Key: "a1", Value: "1"}, {Key: "a2", Value: "2"}}}))
	must(t, s.Publish(asker("a", 0, "", ""), pub("a3", "3", plugin.RangeNamespace, 0)))
	must(t, s.Publish(asker("b", 0, "", ""), pub("b1", "1", 0, 0)))
	if _, err := s.Unpublish(asker("a", 1, "", ""), &plugin.UnpublishRequest{Keys: []string{"a1", "b1"}}); !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "another job") {
		t.Fatalf("unpublish of another job's name: %v; want ErrPermission", err)
	}
	if len(s.Names(nil)) != 4 {
		t.Fatal("a refused unpublish removed names")
	}
	notFound, err := s.Unpublish(asker("a", 1, "", ""), &plugin.UnpublishRequest{Keys: []string{"a1", "nope"}})
	if err != nil || !slices.Equal(notFound, []string{"nope"}) {
		t.Fatalf("unpublish: %v, %v; want nope not found", notFound, err)
	}
	if _, err := s.Unpublish(asker("a", 0, "", ""), &plugin.UnpublishRequest{Range: plugin.RangeNamespace}); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		var k []string
		for _, n := range s.Names(nil) {
			k = append(k, n.Key)
		}
		return k
	}
	if got := keys(); !slices.Equal(got, []string{"a2", "b1"}) {
		t.Fatalf("after unpublishing a:0's job names: %v", got)
	}
	if _, err := s.Unpublish(asker("a", 0, "", ""), &plugin.UnpublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("after unpublishing every name of a:0: %v", got)
	}
	if err := NotFound([]string{"x"}); !errors.Is(err, plugin.ErrNotFound) {
		t.Error(err)
	}
}

func TestHostPolicyAndChanges(t *testing.T) {
	// saved is the state after each change, rebuilt from the changes.
	var saved [][]Name
	state := func() []Name {
		if len(saved) == 0 {
			return nil
		}
		return saved[len(saved)-1]
	}
	s := New(Options{
		Host:    "test",
		Retries: true,
		Refuse: func(held, adding Held, req *plugin.PublishRequest) error {
			if req.Persistence == plugin.PersistProc {
				return plugin.Errorf(plugin.ErrNotSupported, "no proc names here")
			}
			if held.Names+adding.Names > 2 {
				return plugin.Errorf(plugin.ErrUnavailable, "too many")
			}
			if adding.Bytes != len(req.Data[0].Key)+len(req.Data[0].Value) || held.Bytes != 2*held.Names {
				return fmt.Errorf("held %+v, adding %+v: want the keys' and values' bytes", held, adding)
			}
			return nil
		},
		OnChange: func(added, removed []Name) {
			all := slices.Clone(state())
			for _, n := range removed {
				all = slices.DeleteFunc(all, func(o Name) bool { return o.Key == n.Key })
			}
			saved = append(saved, append(all, added...))
		},
	})
	a := asker("a", 0, "", "")
	if err := s.Publish(a, pub("p", "v", 0, plugin.PersistProc)); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("policy refusal: %v", err)
	}
	must(t, s.Publish(a, pub("x", "1", 0, 0)))
	must(t, s.Publish(a, pub("y", "1", 0, 0)))
	if err := s.Publish(a, pub("z", "1", 0, 0)); !errors.Is(err, plugin.ErrUnavailable) {
		t.Errorf("third name: %v; want the bound", err)
	}
	if err := s.Publish(a, pub("y", "1", 0, 0)); err != nil {
		t.Errorf("a retry at the bound adds nothing and passes: %v", err)
	}
	if n := s.Drop(func(n *Name) bool { return n.Key == "x" }); n != 1 {
		t.Errorf("Drop removed %d", n)
	}
	if len(saved) != 3 || len(saved[2]) != 1 || saved[2][0].Key != "y" {
		t.Errorf("OnChange saw %+v; want 3 changes ending with y alone", saved)
	}
	s2 := New(Options{Host: "test"})
	s2.Load(saved[2])
	if found, _, _ := s2.Take(a, []string{"y"}, false); len(found) != 1 {
		t.Error("a loaded name is not found")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
