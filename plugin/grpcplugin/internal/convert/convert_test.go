package convert

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gopmi/gopmi/plugin"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// wire sends m through protobuf's binary encoding, as gRPC would.
func wire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %T: %v", m, err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal %T: %v", m, err)
	}
	return out
}

// roundTrip converts in to the wire type, through the wire, and back.
func roundTrip[G any, M proto.Message](t *testing.T, in G, to func(G) M, from func(M) G) G {
	t.Helper()
	return from(wire(t, to(in)))
}

var (
	procs = []plugin.Proc{{Nspace: "a", Rank: 5}, {Nspace: "b", Rank: plugin.RankWildcard}}
	infos = []plugin.Info{{Key: "k1", Value: "v1"}, {Key: "k2", Value: ""}}
)

func TestRoundTrip(t *testing.T) {
	job := plugin.Job{
		Nspace: "job", Size: 4, UniverseSize: 8, Parent: "parent",
		Nodes: []plugin.Node{{ID: 3, Name: "n3", Ranks: []int32{1, 0}, Addr: "10.0.0.3"}, {ID: 1, Name: "n1", Ranks: []int32{2, 3}}},
		Apps:  []plugin.App{{FirstRank: 1, Size: 3, Cmd: "a", Ranks: []int32{1, 2, 3}}, {FirstRank: 0, Size: 2, Cmd: "b", Ranks: []int32{4, 0}}},
	}
	tests := []struct {
		name string
		in   any
		rt   func(t *testing.T, in any) any
	}{
		{"BackendInfo", &plugin.BackendInfo{Name: "n", Version: "v", APIVersions: []string{"1.0"}, Capabilities: []string{"publish", "spawn"}},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.BackendInfo), ToGetInfoResponse, FromGetInfoResponse)
			}},
		{"ConfigureRequest", &plugin.ConfigureRequest{APIVersion: "1.0", Job: job, NodeID: 1, Config: []byte(`{"x":1}`)},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ConfigureRequest), ToConfigureRequest, FromConfigureRequest)
			}},
		{"ConfigureResponse", &plugin.ConfigureResponse{Attrs: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ConfigureResponse), ToConfigureResponse, FromConfigureResponse)
			}},
		{"ClientConnected", &plugin.ClientRequest{Procs: procs, Info: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ClientRequest), ToClientConnectedRequest, FromClientConnectedRequest)
			}},
		{"ClientFinalized", &plugin.ClientRequest{Procs: procs[1:], Info: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ClientRequest), ToClientFinalizedRequest, FromClientFinalizedRequest)
			}},
		{"AbortRequest", &plugin.AbortRequest{Proc: procs[0], Status: 7, Message: "bye", Targets: procs},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.AbortRequest), ToAbortRequest, FromAbortRequest)
			}},
		{"FenceRequest", &plugin.FenceRequest{ID: "world/3", Procs: procs, LocalProcs: procs[:1], Node: "n1",
			Data: []byte{0, 1, 2, 255}, Collect: true, Timeout: 1500 * time.Millisecond, HandOver: true},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.FenceRequest), ToFenceRequest, FromFenceRequest)
			}},
		{"FenceResponse", &plugin.FenceResponse{Data: []byte("blob")},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.FenceResponse), ToFenceResponse, FromFenceResponse)
			}},
		{"ModexRequest", &plugin.ModexRequest{Requestor: procs[0], Proc: plugin.Proc{Nspace: "a", Rank: 9}, Timeout: time.Minute},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ModexRequest), ToDirectModexRequest, FromDirectModexRequest)
			}},
		{"ModexResponse", &plugin.ModexResponse{Data: []byte("blob")},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ModexResponse), ToDirectModexResponse, FromDirectModexResponse)
			}},
		{"PublishRequest", &plugin.PublishRequest{Proc: procs[0], Data: infos, Range: plugin.RangeGlobal,
			Persistence: plugin.PersistFirstRead, Info: infos[:1]},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.PublishRequest), ToPublishRequest, FromPublishRequest)
			}},
		{"LookupRequest", &plugin.LookupRequest{Proc: procs[0], Keys: []string{"a", "b"}, Range: plugin.RangeLocal,
			Wait: true, Timeout: time.Second, Info: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.LookupRequest), ToLookupRequest, FromLookupRequest)
			}},
		{"LookupResponse", &plugin.LookupResponse{Data: []plugin.Published{{Key: "a", Value: "1", Publisher: procs[0]}, {Key: "b", Value: "2", Publisher: procs[1]}}},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.LookupResponse), ToLookupResponse, FromLookupResponse)
			}},
		{"UnpublishRequest", &plugin.UnpublishRequest{Proc: procs[0], Keys: []string{"a"}, Range: plugin.RangeNamespace, Info: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.UnpublishRequest), ToUnpublishRequest, FromUnpublishRequest)
			}},
		{"SpawnRequest", &plugin.SpawnRequest{Requestor: procs[0], JobInfo: infos, Preput: infos[:1], Timeout: 2 * time.Minute,
			Apps: []plugin.SpawnApp{
				{Cmd: "a", Argv: []string{"-x", ""}, Env: []string{"A=1"}, Cwd: "/tmp", MaxProcs: 2, Info: infos},
				{Cmd: "b", MaxProcs: 1},
			}},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.SpawnRequest), ToSpawnRequest, FromSpawnRequest)
			}},
		{"SpawnResponse", &plugin.SpawnResponse{Nspace: "spawned"},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.SpawnResponse), ToSpawnResponse, FromSpawnResponse)
			}},
		{"ConnectRequest", &plugin.ConnectRequest{Procs: procs, Info: infos, Timeout: time.Second},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ConnectRequest), ToConnectRequest, FromConnectRequest)
			}},
		{"ConnectResponse", &plugin.ConnectResponse{ID: "c1"},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.ConnectResponse), ToConnectResponse, FromConnectResponse)
			}},
		{"DisconnectRequest", &plugin.DisconnectRequest{Procs: procs, Info: infos, Timeout: time.Second},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.DisconnectRequest), ToDisconnectRequest, FromDisconnectRequest)
			}},
		{"QueryRequest", &plugin.QueryRequest{Proc: procs[0], Queries: []plugin.Query{{Keys: []string{"a"}, Qualifiers: infos}, {Keys: []string{"b", "c"}}}},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.QueryRequest), ToQueryRequest, FromQueryRequest)
			}},
		{"QueryResponse", &plugin.QueryResponse{Results: infos},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.QueryResponse), ToQueryResponse, FromQueryResponse)
			}},
		{"LogRequest", &plugin.LogRequest{Proc: procs[0], Data: infos, Directives: infos[:1]},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.LogRequest), ToLogRequest, FromLogRequest)
			}},
		{"EventRequest", &plugin.EventRequest{Code: plugin.EventProcAborted, Source: procs[0], Range: plugin.RangeSession, Info: infos, Node: "n1"},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.EventRequest), ToNotifyEventRequest, FromNotifyEventRequest)
			}},
		{"AwaitEventsRequest", &plugin.AwaitEventsRequest{Nspace: "a", After: 7, Timeout: 3 * time.Second},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.AwaitEventsRequest), ToAwaitEventsRequest, FromAwaitEventsRequest)
			}},
		{"AwaitEventsResponse", &plugin.AwaitEventsResponse{Missed: true, Events: []plugin.Event{{Seq: 8,
			EventRequest: plugin.EventRequest{Code: "pmix:-1007", Source: procs[0], Range: plugin.RangeNamespace, Info: infos, Node: "n0"}}}},
			func(t *testing.T, in any) any {
				return roundTrip(t, in.(*plugin.AwaitEventsResponse), ToAwaitEventsResponse, FromAwaitEventsResponse)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A field added to the contract but not to the conversions must
			// fail here, so every input sets every field.
			for _, path := range zeroFields(reflect.ValueOf(tt.in), tt.name) {
				t.Errorf("test input leaves %s unset", path)
			}
			if diff := cmp.Diff(tt.in, tt.rt(t, tt.in)); diff != "" {
				t.Errorf("round trip changed the value (-in +out):\n%s", diff)
			}
		})
	}
}

// zeroFields lists the zero-valued fields of v, looking into pointers,
// structs and the first element of slices.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(v.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		return zeroFields(v.Index(0), path+"[0]")
	default:
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
}

// TestRoundTripEmpty: nil requests read as empty ones, and an empty value
// survives the trip (repeated fields come back nil).
func TestRoundTripEmpty(t *testing.T) {
	got := roundTrip(t, nil, ToFenceRequest, FromFenceRequest)
	if diff := cmp.Diff(&plugin.FenceRequest{}, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("nil fence request (-want +got):\n%s", diff)
	}
	if got := FromLookupResponse(nil); got == nil || len(got.Data) != 0 {
		t.Errorf("FromLookupResponse(nil) = %+v; want an empty response", got)
	}
	if got := FromGetInfoResponse(nil); got == nil || got.Name != "" {
		t.Errorf("FromGetInfoResponse(nil) = %+v; want an empty info", got)
	}
}

// TestEnums: the Go constants and the proto enums share their numbers, so
// the casts in the conversions are right.
func TestEnums(t *testing.T) {
	checkEnum(t, "range", map[plugin.Range]rmv1.Range{
		plugin.RangeDefault:   rmv1.Range_RANGE_UNSPECIFIED,
		plugin.RangeLocal:     rmv1.Range_RANGE_LOCAL,
		plugin.RangeNamespace: rmv1.Range_RANGE_NAMESPACE,
		plugin.RangeSession:   rmv1.Range_RANGE_SESSION,
		plugin.RangeGlobal:    rmv1.Range_RANGE_GLOBAL,
	}, toRange, fromRange, rmv1.Range_name)
	checkEnum(t, "persistence", map[plugin.Persistence]rmv1.Persistence{
		plugin.PersistDefault:    rmv1.Persistence_PERSISTENCE_UNSPECIFIED,
		plugin.PersistIndefinite: rmv1.Persistence_PERSISTENCE_INDEFINITE,
		plugin.PersistFirstRead:  rmv1.Persistence_PERSISTENCE_FIRST_READ,
		plugin.PersistProc:       rmv1.Persistence_PERSISTENCE_PROC,
		plugin.PersistApp:        rmv1.Persistence_PERSISTENCE_APP,
		plugin.PersistSession:    rmv1.Persistence_PERSISTENCE_SESSION,
	}, toPersistence, fromPersistence, rmv1.Persistence_name)
}

// checkEnum checks that to and from map each pair of pairs onto each
// other and that pairs covers every value the proto enum names.
func checkEnum[G comparable, P interface {
	comparable
	fmt.Stringer
}](t *testing.T, what string, pairs map[G]P, to func(G) P, from func(P) G, names map[int32]string) {
	t.Helper()
	for g, p := range pairs {
		if to(g) != p || from(p) != g {
			t.Errorf("%s %v <-> %s mismatch", what, g, p)
		}
	}
	if len(pairs) != len(names) {
		t.Errorf("proto has %d %s values, Go %d", len(names), what, len(pairs))
	}
}

var sentinels = []struct {
	err  error
	code codes.Code
}{
	{plugin.ErrNotSupported, codes.Unimplemented},
	{plugin.ErrNotFound, codes.NotFound},
	{plugin.ErrAlreadyExists, codes.AlreadyExists},
	{plugin.ErrInvalidArgument, codes.InvalidArgument},
	{plugin.ErrTimeout, codes.DeadlineExceeded},
	{plugin.ErrAborted, codes.Aborted},
	{plugin.ErrPermission, codes.PermissionDenied},
	{plugin.ErrUnavailable, codes.Unavailable},
}

// TestErrorRoundTrip: every sentinel keeps its identity and its message,
// unchanged, through a status, its wire encoding and back.
func TestErrorRoundTrip(t *testing.T) {
	for _, s := range sentinels {
		t.Run(s.err.Error(), func(t *testing.T) {
			in := fmt.Errorf("fence world/3: ranks 4-7 (node n1) did not arrive in 30s: %w", s.err)
			st := status.Convert(ToStatus(in))
			if st.Code() != s.code {
				t.Errorf("code = %s; want %s", st.Code(), s.code)
			}
			onWire := status.FromProto(wire(t, st.Proto())).Err()
			out := FromCallError(context.Background(), "fence", onWire)
			if !errors.Is(out, s.err) {
				t.Errorf("errors.Is(%v, %v) = false", out, s.err)
			}
			if out.Error() != in.Error() {
				t.Errorf("message = %q; want %q", out.Error(), in.Error())
			}
			// Forwarding it once more (a plugin in front of a daemon) keeps
			// code and message.
			again := FromCallError(context.Background(), "fence", ToStatus(out))
			if !errors.Is(again, s.err) || again.Error() != in.Error() {
				t.Errorf("forwarded: %v (is %v: %t)", again, s.err, errors.Is(again, s.err))
			}
			for _, other := range sentinels {
				if other.err != s.err && errors.Is(out, other.err) {
					t.Errorf("error also matches %v", other.err)
				}
			}
		})
	}
}

func TestToStatus(t *testing.T) {
	tests := []struct {
		name       string
		in         error
		wantCode   codes.Code
		wantReason string
	}{
		{"nil", nil, codes.OK, ""},
		{"plain", errors.New("boom"), codes.Unknown, "UNKNOWN"},
		{"deadline", fmt.Errorf("fence: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "TIMEOUT"},
		{"canceled", fmt.Errorf("fence: %w", context.Canceled), codes.Aborted, "ABORTED"},
		{"backend gone upstream", fmt.Errorf("fence: daemon: %w", plugin.ErrBackendGone), codes.Unavailable, "UNAVAILABLE"},
		{"raw grpc status", status.Error(codes.ResourceExhausted, "too big"), codes.ResourceExhausted, "UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ToStatus(tt.in)
			if tt.in == nil {
				if err != nil {
					t.Fatalf("ToStatus(nil) = %v", err)
				}
				return
			}
			st := status.Convert(err)
			if st.Code() != tt.wantCode {
				t.Errorf("code = %s; want %s", st.Code(), tt.wantCode)
			}
			if st.Message() != tt.in.Error() {
				t.Errorf("message = %q; want %q", st.Message(), tt.in.Error())
			}
			reason, ok := reasonOf(st)
			if !ok || reason != tt.wantReason {
				t.Errorf("reason = %q, %t; want %q", reason, ok, tt.wantReason)
			}
		})
	}
}

// deadlineOnly is a context whose deadline has passed but whose Err is
// still nil, as a real one is for a moment.
type deadlineOnly struct{ dl time.Time }

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.dl, true }
func (deadlineOnly) Done() <-chan struct{}         { return nil }
func (deadlineOnly) Err() error                    { return nil }
func (deadlineOnly) Value(any) any                 { return nil }

func TestFromCallError(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	// A deadline in the past whose context has not noticed yet.
	passed := deadlineOnly{time.Now().Add(-time.Millisecond)}
	withInfo := func(code codes.Code, msg, reason string) error {
		st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Domain: ErrorDomain, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name    string
		ctx     context.Context
		in      error
		want    []error // errors.Is must hold for each
		notWant []error
		msg     string
	}{
		{"host deadline", expired, status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			[]error{plugin.ErrTimeout, context.DeadlineExceeded}, []error{plugin.ErrBackendGone},
			"fence: context deadline exceeded: timed out"},
		{"host cancel", cancelled, status.Error(codes.Canceled, "context canceled"),
			[]error{plugin.ErrAborted, context.Canceled}, nil, "fence: context canceled: aborted"},
		{"backend timeout's message wins over host deadline", expired, withInfo(codes.DeadlineExceeded, "fence f: rank 3 missing: timed out", "TIMEOUT"),
			[]error{plugin.ErrTimeout, context.DeadlineExceeded}, []error{context.Canceled}, "fence f: rank 3 missing: timed out"},
		{"backend saw the host's deadline first", expired, withInfo(codes.DeadlineExceeded, "fence f: context deadline exceeded", "TIMEOUT"),
			[]error{plugin.ErrTimeout, context.DeadlineExceeded}, nil, "fence f: context deadline exceeded"},
		{"backend timeout, host fine", context.Background(), withInfo(codes.DeadlineExceeded, "fence f: rank 3 missing: timed out", "TIMEOUT"),
			[]error{plugin.ErrTimeout}, []error{context.DeadlineExceeded}, "fence f: rank 3 missing: timed out"},
		{"grpc's deadline error before the context's timer", passed, status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: CANCEL"),
			[]error{plugin.ErrTimeout, context.DeadlineExceeded}, []error{plugin.ErrBackendGone}, "fence: context deadline exceeded: timed out"},
		{"broken connection", context.Background(), status.Error(codes.Unavailable, "error reading from server: EOF"),
			[]error{plugin.ErrBackendGone}, []error{plugin.ErrUnavailable}, "fence: error reading from server: EOF: backend gone"},
		{"backend unavailable", context.Background(), withInfo(codes.Unavailable, "fence: node n2 unreachable: unavailable", "UNAVAILABLE"),
			[]error{plugin.ErrUnavailable}, []error{plugin.ErrBackendGone}, "fence: node n2 unreachable: unavailable"},
		{"reason beats code", context.Background(), withInfo(codes.Unknown, "x: not found", "NOT_FOUND"),
			[]error{plugin.ErrNotFound}, nil, "x: not found"},
		{"old plugin without the rpc", context.Background(), status.Error(codes.Unimplemented, "method Spawn not implemented"),
			[]error{plugin.ErrNotSupported}, nil, "fence: method Spawn not implemented"},
		{"non-go backend timeout", context.Background(), status.Error(codes.DeadlineExceeded, "fence f: ranks 2-3 missing"),
			[]error{plugin.ErrTimeout}, nil, "fence f: ranks 2-3 missing"},
		{"remote cancel", context.Background(), status.Error(codes.Canceled, "stopping"),
			[]error{plugin.ErrAborted}, nil, "fence: stopping"},
		{"unknown", context.Background(), withInfo(codes.Unknown, "boom", "UNKNOWN"),
			nil, []error{plugin.ErrNotFound, plugin.ErrTimeout}, "boom"},
		{"grpc's own error", context.Background(), status.Error(codes.ResourceExhausted, "grpc: received message larger than max (9 vs. 8)"),
			nil, []error{plugin.ErrBackendGone}, "fence: grpc: received message larger than max (9 vs. 8)"},
		{"empty message", context.Background(), status.Error(codes.NotFound, ""),
			[]error{plugin.ErrNotFound}, nil, "fence: backend error NotFound: not found"},
		{"not grpc", context.Background(), errors.New("interceptor said no"),
			nil, nil, "fence: interceptor said no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := FromCallError(tt.ctx, "fence", tt.in)
			for _, w := range tt.want {
				if !errors.Is(out, w) {
					t.Errorf("errors.Is(%q, %v) = false", out, w)
				}
			}
			for _, w := range tt.notWant {
				if errors.Is(out, w) {
					t.Errorf("errors.Is(%q, %v) = true", out, w)
				}
			}
			if out.Error() != tt.msg {
				t.Errorf("message = %q; want %q", out.Error(), tt.msg)
			}
		})
	}
	if FromCallError(context.Background(), "x", nil) != nil {
		t.Error("FromCallError(nil) != nil")
	}
}
