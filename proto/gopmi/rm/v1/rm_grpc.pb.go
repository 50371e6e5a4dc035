// The gopmi resource-manager (RM) backend service, version 1.
//
// gopmi's per-job shim serves the PMI-1 and PMI-2 wire protocols to the tasks
// of one node. Everything that crosses a node or a job goes to an RM backend
// through ResourceManagerService: the data exchange of a fence, a get for data
// another node holds, the name service, spawn, connect, queries, logging and
// abort. The calls mirror the PMIx server RM interface (pmix_server_module_t).
//
// This file is a public contract. Go vendors never see it: they implement the
// Go interfaces of package github.com/gopmi/gopmi/plugin and call
// grpcplugin.Serve, which speaks this service for them. A vendor writing a
// backend in another language implements this service directly and runs it
// as a hashicorp/go-plugin gRPC plugin:
//
//   - the host starts the plugin with GOPMI_PLUGIN=<magic cookie> and
//     PLUGIN_PROTOCOL_VERSIONS=1 in its environment (and, when set,
//     PLUGIN_UNIX_SOCKET_DIR: create the listening unix socket there);
//   - the plugin listens (a unix socket, or TCP on 127.0.0.1), then prints one
//     line on stdout: "1|1|unix|/path/to/socket|grpc" (core protocol 1, app
//     protocol 1 = this package's major version, network, address, protocol);
//   - the plugin MUST register the standard gRPC health service
//     (grpc.health.v1.Health) and report the service named "plugin" as
//     SERVING; go-plugin checks it before dispensing. go-plugin's controller
//     (plugin.GRPCController/Shutdown) is optional: without it the host kills
//     the process;
//   - log lines on stderr that are JSON objects with "@level" (trace, debug,
//     info, warn, error), "@message" and "@timestamp"
//     (2006-01-02T15:04:05.000000Z07:00) are re-logged by the host at their
//     level with their other fields; other lines are logged at debug;
//   - the host is the only client; it closes the connection or kills the
//     process when the job ends. Ignore SIGPIPE so that a late log line to a
//     closed stderr does not kill the plugin.
//
// Process model: the shim on each node starts its own plugin process for
// the job, and ends it with the job: one plugin process per job per node,
// which sees only that node's calls. What spans nodes or jobs (a fence's
// exchange, another node's data, names, connect, spawn) must go over the
// resource manager's own transport to something that sees every node; the
// recommended plugin is a thin per-node client of the RM's step or node
// daemon. A plugin that keeps cross-node state in its own memory waits
// forever (until the time-out) for the other node's Fence.
//
// The same service is also served on plain sockets (no go-plugin handshake)
// by backends that live in a long-running daemon; per-node plugin processes
// then forward to the daemon.
//
// Calls. The host calls GetInfo, then Configure, then the rest in any order
// and concurrently (one Fence per node per collective, DirectModex and
// Lookup calls may block for long). Every call carries a gRPC deadline set by
// the host; a backend must return when it passes. Requests that carry their
// own timeout field (fence, modex, lookup, spawn, connect) bound the
// operation inside the backend, which should answer DEADLINE_EXCEEDED with a
// message naming who did not arrive before the gRPC deadline passes.
//
// Errors. A failed call returns a gRPC status whose code names the kind of
// error and whose message is the full human-readable message, shown to users
// as is (e.g. "fence world/3: ranks 4-7 (node n1) did not arrive in 30s:
// timed out"):
//
//   UNIMPLEMENTED       the backend does not implement the call or one of its
//                       options (a spawn info key, a publish range); the
//                       message names it
//   NOT_FOUND           no such key, name, job or process
//   ALREADY_EXISTS      a name is already published in the range
//   INVALID_ARGUMENT    the request is malformed
//   DEADLINE_EXCEEDED   the operation did not complete in time; the message
//                       names the ranks or nodes that did not arrive
//   ABORTED             the job was aborted or the operation cancelled
//   PERMISSION_DENIED   the caller may not do this
//   UNAVAILABLE         the backend cannot reach what it needs right now
//   CANCELLED           read by the host like ABORTED
//   anything else       an error of no particular kind
//
// The host cannot tell an UNAVAILABLE sent by the backend from one caused by
// a broken connection, and treats a bare UNAVAILABLE as "the backend is
// gone". A backend that means "try again" attaches a google.rpc.ErrorInfo
// detail with domain "gopmi.rm.v1" and reason "UNAVAILABLE"; Go backends do
// this for every error, with these reasons: NOT_SUPPORTED, NOT_FOUND,
// ALREADY_EXISTS, INVALID_ARGUMENT, TIMEOUT, ABORTED, PERMISSION_DENIED,
// UNAVAILABLE, UNKNOWN. When the detail is present the host trusts its reason
// over the code.
//
// Evolution. Within v1 only additive changes are made: new fields, new
// messages, new RPCs. A host talking to an older plugin gets UNIMPLEMENTED for
// a new RPC and treats it as "not supported". A breaking change creates
// gopmi.rm.v2 and a new go-plugin protocol version.

// Code generated by protoc-gen-go-grpc. DO NOT EDIT.
// versions:
// - protoc-gen-go-grpc v1.6.2
// - protoc             v3.21.12
// source: gopmi/rm/v1/rm.proto

package rmv1

import (
	context "context"
	grpc "google.golang.org/grpc"
	codes "google.golang.org/grpc/codes"
	status "google.golang.org/grpc/status"
)

// This is a compile-time assertion to ensure that this generated file
// is compatible with the grpc package it is being compiled against.
// Requires gRPC-Go v1.64.0 or later.
const _ = grpc.SupportPackageIsVersion9

const (
	ResourceManagerService_GetInfo_FullMethodName         = "/gopmi.rm.v1.ResourceManagerService/GetInfo"
	ResourceManagerService_Configure_FullMethodName       = "/gopmi.rm.v1.ResourceManagerService/Configure"
	ResourceManagerService_ClientConnected_FullMethodName = "/gopmi.rm.v1.ResourceManagerService/ClientConnected"
	ResourceManagerService_ClientFinalized_FullMethodName = "/gopmi.rm.v1.ResourceManagerService/ClientFinalized"
	ResourceManagerService_Abort_FullMethodName           = "/gopmi.rm.v1.ResourceManagerService/Abort"
	ResourceManagerService_Fence_FullMethodName           = "/gopmi.rm.v1.ResourceManagerService/Fence"
	ResourceManagerService_DirectModex_FullMethodName     = "/gopmi.rm.v1.ResourceManagerService/DirectModex"
	ResourceManagerService_Publish_FullMethodName         = "/gopmi.rm.v1.ResourceManagerService/Publish"
	ResourceManagerService_Lookup_FullMethodName          = "/gopmi.rm.v1.ResourceManagerService/Lookup"
	ResourceManagerService_Unpublish_FullMethodName       = "/gopmi.rm.v1.ResourceManagerService/Unpublish"
	ResourceManagerService_Spawn_FullMethodName           = "/gopmi.rm.v1.ResourceManagerService/Spawn"
	ResourceManagerService_Connect_FullMethodName         = "/gopmi.rm.v1.ResourceManagerService/Connect"
	ResourceManagerService_Disconnect_FullMethodName      = "/gopmi.rm.v1.ResourceManagerService/Disconnect"
	ResourceManagerService_Query_FullMethodName           = "/gopmi.rm.v1.ResourceManagerService/Query"
	ResourceManagerService_Log_FullMethodName             = "/gopmi.rm.v1.ResourceManagerService/Log"
	ResourceManagerService_NotifyEvent_FullMethodName     = "/gopmi.rm.v1.ResourceManagerService/NotifyEvent"
	ResourceManagerService_AwaitEvents_FullMethodName     = "/gopmi.rm.v1.ResourceManagerService/AwaitEvents"
	ResourceManagerService_Depart_FullMethodName          = "/gopmi.rm.v1.ResourceManagerService/Depart"
)

// ResourceManagerServiceClient is the client API for ResourceManagerService service.
//
// For semantics around ctx use and closing/ending streaming RPCs, please refer to https://pkg.go.dev/google.golang.org/grpc/?tab=doc#ClientConn.NewStream.
//
// ResourceManagerService is what an RM backend serves to gopmi's shim.
type ResourceManagerServiceClient interface {
	// GetInfo names the backend, the contract versions it speaks and the
	// optional capabilities it implements. The host calls it first, once.
	GetInfo(ctx context.Context, in *GetInfoRequest, opts ...grpc.CallOption) (*GetInfoResponse, error)
	// Configure registers the calling shim's job and node with the backend.
	// It comes right after GetInfo, once per shim.
	Configure(ctx context.Context, in *ConfigureRequest, opts ...grpc.CallOption) (*ConfigureResponse, error)
	// ClientConnected reports that tasks initialized PMI (batched per node).
	ClientConnected(ctx context.Context, in *ClientConnectedRequest, opts ...grpc.CallOption) (*ClientConnectedResponse, error)
	// ClientFinalized reports that tasks finalized PMI (batched per node).
	ClientFinalized(ctx context.Context, in *ClientFinalizedRequest, opts ...grpc.CallOption) (*ClientFinalizedResponse, error)
	// Abort ends processes with an exit status.
	Abort(ctx context.Context, in *AbortRequest, opts ...grpc.CallOption) (*AbortResponse, error)
	// Fence is one node's part of a collective: it returns when every
	// participating node called Fence with the same (nspace, id), or fails.
	Fence(ctx context.Context, in *FenceRequest, opts ...grpc.CallOption) (*FenceResponse, error)
	// DirectModex fetches the data a remote process's node contributed.
	DirectModex(ctx context.Context, in *DirectModexRequest, opts ...grpc.CallOption) (*DirectModexResponse, error)
	// Publish publishes names (capability "publish").
	Publish(ctx context.Context, in *PublishRequest, opts ...grpc.CallOption) (*PublishResponse, error)
	// Lookup looks names up, optionally waiting for them (capability
	// "publish").
	Lookup(ctx context.Context, in *LookupRequest, opts ...grpc.CallOption) (*LookupResponse, error)
	// Unpublish removes names (capability "publish").
	Unpublish(ctx context.Context, in *UnpublishRequest, opts ...grpc.CallOption) (*UnpublishResponse, error)
	// Spawn starts a new job (capability "spawn").
	Spawn(ctx context.Context, in *SpawnRequest, opts ...grpc.CallOption) (*SpawnResponse, error)
	// Connect connects processes of several jobs (capability "connect").
	Connect(ctx context.Context, in *ConnectRequest, opts ...grpc.CallOption) (*ConnectResponse, error)
	// Disconnect undoes a Connect (capability "connect").
	Disconnect(ctx context.Context, in *DisconnectRequest, opts ...grpc.CallOption) (*DisconnectResponse, error)
	// Query answers questions about jobs, processes and nodes (capability
	// "query").
	Query(ctx context.Context, in *QueryRequest, opts ...grpc.CallOption) (*QueryResponse, error)
	// Log logs on a process's behalf (capability "log").
	Log(ctx context.Context, in *LogRequest, opts ...grpc.CallOption) (*LogResponse, error)
	// NotifyEvent reports an event beyond the node (capability "notify").
	NotifyEvent(ctx context.Context, in *NotifyEventRequest, opts ...grpc.CallOption) (*NotifyEventResponse, error)
	// AwaitEvents waits for the clients' events a job's processes are to
	// hear (capability "events"; new in 1.1).
	AwaitEvents(ctx context.Context, in *AwaitEventsRequest, opts ...grpc.CallOption) (*AwaitEventsResponse, error)
	// Depart is a node's host's last call for a job on several nodes, once
	// its processes finalized and its fences completed: the backend keeps
	// the node's data readable without the node (capability "depart",
	// contract 1.2).
	Depart(ctx context.Context, in *DepartRequest, opts ...grpc.CallOption) (*DepartResponse, error)
}

type resourceManagerServiceClient struct {
	cc grpc.ClientConnInterface
}

func NewResourceManagerServiceClient(cc grpc.ClientConnInterface) ResourceManagerServiceClient {
	return &resourceManagerServiceClient{cc}
}

func (c *resourceManagerServiceClient) GetInfo(ctx context.Context, in *GetInfoRequest, opts ...grpc.CallOption) (*GetInfoResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(GetInfoResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_GetInfo_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Configure(ctx context.Context, in *ConfigureRequest, opts ...grpc.CallOption) (*ConfigureResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ConfigureResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Configure_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) ClientConnected(ctx context.Context, in *ClientConnectedRequest, opts ...grpc.CallOption) (*ClientConnectedResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ClientConnectedResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_ClientConnected_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) ClientFinalized(ctx context.Context, in *ClientFinalizedRequest, opts ...grpc.CallOption) (*ClientFinalizedResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ClientFinalizedResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_ClientFinalized_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Abort(ctx context.Context, in *AbortRequest, opts ...grpc.CallOption) (*AbortResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(AbortResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Abort_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Fence(ctx context.Context, in *FenceRequest, opts ...grpc.CallOption) (*FenceResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(FenceResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Fence_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) DirectModex(ctx context.Context, in *DirectModexRequest, opts ...grpc.CallOption) (*DirectModexResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(DirectModexResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_DirectModex_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Publish(ctx context.Context, in *PublishRequest, opts ...grpc.CallOption) (*PublishResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(PublishResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Publish_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Lookup(ctx context.Context, in *LookupRequest, opts ...grpc.CallOption) (*LookupResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(LookupResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Lookup_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Unpublish(ctx context.Context, in *UnpublishRequest, opts ...grpc.CallOption) (*UnpublishResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(UnpublishResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Unpublish_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Spawn(ctx context.Context, in *SpawnRequest, opts ...grpc.CallOption) (*SpawnResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(SpawnResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Spawn_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Connect(ctx context.Context, in *ConnectRequest, opts ...grpc.CallOption) (*ConnectResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ConnectResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Connect_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Disconnect(ctx context.Context, in *DisconnectRequest, opts ...grpc.CallOption) (*DisconnectResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(DisconnectResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Disconnect_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Query(ctx context.Context, in *QueryRequest, opts ...grpc.CallOption) (*QueryResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(QueryResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Query_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Log(ctx context.Context, in *LogRequest, opts ...grpc.CallOption) (*LogResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(LogResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Log_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) NotifyEvent(ctx context.Context, in *NotifyEventRequest, opts ...grpc.CallOption) (*NotifyEventResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(NotifyEventResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_NotifyEvent_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) AwaitEvents(ctx context.Context, in *AwaitEventsRequest, opts ...grpc.CallOption) (*AwaitEventsResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(AwaitEventsResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_AwaitEvents_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *resourceManagerServiceClient) Depart(ctx context.Context, in *DepartRequest, opts ...grpc.CallOption) (*DepartResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(DepartResponse)
	err := c.cc.Invoke(ctx, ResourceManagerService_Depart_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ResourceManagerServiceServer is the server API for ResourceManagerService service.
// All implementations must embed UnimplementedResourceManagerServiceServer
// for forward compatibility.
//
// ResourceManagerService is what an RM backend serves to gopmi's shim.
type ResourceManagerServiceServer interface {
	// GetInfo names the backend, the contract versions it speaks and the
	// optional capabilities it implements. The host calls it first, once.
	GetInfo(context.Context, *GetInfoRequest) (*GetInfoResponse, error)
	// Configure registers the calling shim's job and node with the backend.
	// It comes right after GetInfo, once per shim.
	Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error)
	// ClientConnected reports that tasks initialized PMI (batched per node).
	ClientConnected(context.Context, *ClientConnectedRequest) (*ClientConnectedResponse, error)
	// ClientFinalized reports that tasks finalized PMI (batched per node).
	ClientFinalized(context.Context, *ClientFinalizedRequest) (*ClientFinalizedResponse, error)
	// Abort ends processes with an exit status.
	Abort(context.Context, *AbortRequest) (*AbortResponse, error)
	// Fence is one node's part of a collective: it returns when every
	// participating node called Fence with the same (nspace, id), or fails.
	Fence(context.Context, *FenceRequest) (*FenceResponse, error)
	// DirectModex fetches the data a remote process's node contributed.
	DirectModex(context.Context, *DirectModexRequest) (*DirectModexResponse, error)
	// Publish publishes names (capability "publish").
	Publish(context.Context, *PublishRequest) (*PublishResponse, error)
	// Lookup looks names up, optionally waiting for them (capability
	// "publish").
	Lookup(context.Context, *LookupRequest) (*LookupResponse, error)
	// Unpublish removes names (capability "publish").
	Unpublish(context.Context, *UnpublishRequest) (*UnpublishResponse, error)
	// Spawn starts a new job (capability "spawn").
	Spawn(context.Context, *SpawnRequest) (*SpawnResponse, error)
	// Connect connects processes of several jobs (capability "connect").
	Connect(context.Context, *ConnectRequest) (*ConnectResponse, error)
	// Disconnect undoes a Connect (capability "connect").
	Disconnect(context.Context, *DisconnectRequest) (*DisconnectResponse, error)
	// Query answers questions about jobs, processes and nodes (capability
	// "query").
	Query(context.Context, *QueryRequest) (*QueryResponse, error)
	// Log logs on a process's behalf (capability "log").
	Log(context.Context, *LogRequest) (*LogResponse, error)
	// NotifyEvent reports an event beyond the node (capability "notify").
	NotifyEvent(context.Context, *NotifyEventRequest) (*NotifyEventResponse, error)
	// AwaitEvents waits for the clients' events a job's processes are to
	// hear (capability "events"; new in 1.1).
	AwaitEvents(context.Context, *AwaitEventsRequest) (*AwaitEventsResponse, error)
	// Depart is a node's host's last call for a job on several nodes, once
	// its processes finalized and its fences completed: the backend keeps
	// the node's data readable without the node (capability "depart",
	// contract 1.2).
	Depart(context.Context, *DepartRequest) (*DepartResponse, error)
	mustEmbedUnimplementedResourceManagerServiceServer()
}

// UnimplementedResourceManagerServiceServer must be embedded to have
// forward compatible implementations.
//
// NOTE: this should be embedded by value instead of pointer to avoid a nil
// pointer dereference when methods are called.
type UnimplementedResourceManagerServiceServer struct{}

func (UnimplementedResourceManagerServiceServer) GetInfo(context.Context, *GetInfoRequest) (*GetInfoResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method GetInfo not implemented")
}
func (UnimplementedResourceManagerServiceServer) Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Configure not implemented")
}
func (UnimplementedResourceManagerServiceServer) ClientConnected(context.Context, *ClientConnectedRequest) (*ClientConnectedResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method ClientConnected not implemented")
}
func (UnimplementedResourceManagerServiceServer) ClientFinalized(context.Context, *ClientFinalizedRequest) (*ClientFinalizedResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method ClientFinalized not implemented")
}
func (UnimplementedResourceManagerServiceServer) Abort(context.Context, *AbortRequest) (*AbortResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Abort not implemented")
}
func (UnimplementedResourceManagerServiceServer) Fence(context.Context, *FenceRequest) (*FenceResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Fence not implemented")
}
func (UnimplementedResourceManagerServiceServer) DirectModex(context.Context, *DirectModexRequest) (*DirectModexResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method DirectModex not implemented")
}
func (UnimplementedResourceManagerServiceServer) Publish(context.Context, *PublishRequest) (*PublishResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Publish not implemented")
}
func (UnimplementedResourceManagerServiceServer) Lookup(context.Context, *LookupRequest) (*LookupResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Lookup not implemented")
}
func (UnimplementedResourceManagerServiceServer) Unpublish(context.Context, *UnpublishRequest) (*UnpublishResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Unpublish not implemented")
}
func (UnimplementedResourceManagerServiceServer) Spawn(context.Context, *SpawnRequest) (*SpawnResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Spawn not implemented")
}
func (UnimplementedResourceManagerServiceServer) Connect(context.Context, *ConnectRequest) (*ConnectResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Connect not implemented")
}
func (UnimplementedResourceManagerServiceServer) Disconnect(context.Context, *DisconnectRequest) (*DisconnectResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Disconnect not implemented")
}
func (UnimplementedResourceManagerServiceServer) Query(context.Context, *QueryRequest) (*QueryResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Query not implemented")
}
func (UnimplementedResourceManagerServiceServer) Log(context.Context, *LogRequest) (*LogResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Log not implemented")
}
func (UnimplementedResourceManagerServiceServer) NotifyEvent(context.Context, *NotifyEventRequest) (*NotifyEventResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method NotifyEvent not implemented")
}
func (UnimplementedResourceManagerServiceServer) AwaitEvents(context.Context, *AwaitEventsRequest) (*AwaitEventsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method AwaitEvents not implemented")
}
func (UnimplementedResourceManagerServiceServer) Depart(context.Context, *DepartRequest) (*DepartResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Depart not implemented")
}
func (UnimplementedResourceManagerServiceServer) mustEmbedUnimplementedResourceManagerServiceServer() {
}
func (UnimplementedResourceManagerServiceServer) testEmbeddedByValue() {}

// UnsafeResourceManagerServiceServer may be embedded to opt out of forward compatibility for this service.
// Use of this interface is not recommended, as added methods to ResourceManagerServiceServer will
// result in compilation errors.
type UnsafeResourceManagerServiceServer interface {
	mustEmbedUnimplementedResourceManagerServiceServer()
}

func RegisterResourceManagerServiceServer(s grpc.ServiceRegistrar, srv ResourceManagerServiceServer) {
	// If the following call panics, it indicates UnimplementedResourceManagerServiceServer was
	// embedded by pointer and is nil.  This will cause panics if an
	// unimplemented method is ever invoked, so we test this at initialization
	// time to prevent it from happening at runtime later due to I/O.
	if t, ok := srv.(interface{ testEmbeddedByValue() }); ok {
		t.testEmbeddedByValue()
	}
	s.RegisterService(&ResourceManagerService_ServiceDesc, srv)
}

func _ResourceManagerService_GetInfo_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(GetInfoRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).GetInfo(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_GetInfo_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).GetInfo(ctx, req.(*GetInfoRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Configure_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ConfigureRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Configure(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Configure_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Configure(ctx, req.(*ConfigureRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_ClientConnected_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ClientConnectedRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).ClientConnected(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_ClientConnected_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).ClientConnected(ctx, req.(*ClientConnectedRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_ClientFinalized_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ClientFinalizedRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).ClientFinalized(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_ClientFinalized_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).ClientFinalized(ctx, req.(*ClientFinalizedRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Abort_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(AbortRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Abort(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Abort_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Abort(ctx, req.(*AbortRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Fence_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(FenceRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Fence(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Fence_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Fence(ctx, req.(*FenceRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_DirectModex_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(DirectModexRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).DirectModex(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_DirectModex_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).DirectModex(ctx, req.(*DirectModexRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Publish_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(PublishRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Publish(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Publish_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Publish(ctx, req.(*PublishRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Lookup_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(LookupRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Lookup(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Lookup_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Lookup(ctx, req.(*LookupRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Unpublish_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(UnpublishRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Unpublish(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Unpublish_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Unpublish(ctx, req.(*UnpublishRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Spawn_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(SpawnRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Spawn(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Spawn_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Spawn(ctx, req.(*SpawnRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Connect_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ConnectRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Connect(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Connect_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Connect(ctx, req.(*ConnectRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Disconnect_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(DisconnectRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Disconnect(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Disconnect_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Disconnect(ctx, req.(*DisconnectRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Query_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(QueryRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Query(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Query_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Query(ctx, req.(*QueryRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Log_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(LogRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Log(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Log_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Log(ctx, req.(*LogRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_NotifyEvent_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(NotifyEventRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).NotifyEvent(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_NotifyEvent_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).NotifyEvent(ctx, req.(*NotifyEventRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_AwaitEvents_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(AwaitEventsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).AwaitEvents(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_AwaitEvents_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).AwaitEvents(ctx, req.(*AwaitEventsRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _ResourceManagerService_Depart_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(DepartRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(ResourceManagerServiceServer).Depart(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: ResourceManagerService_Depart_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(ResourceManagerServiceServer).Depart(ctx, req.(*DepartRequest))
	}
	return interceptor(ctx, in, info, handler)
}

// ResourceManagerService_ServiceDesc is the grpc.ServiceDesc for ResourceManagerService service.
// It's only intended for direct use with grpc.RegisterService,
// and not to be introspected or modified (even as a copy)
var ResourceManagerService_ServiceDesc = grpc.ServiceDesc{
	ServiceName: "gopmi.rm.v1.ResourceManagerService",
	HandlerType: (*ResourceManagerServiceServer)(nil),
	Methods: []grpc.MethodDesc{
		{
			MethodName: "GetInfo",
			Handler:    _ResourceManagerService_GetInfo_Handler,
		},
		{
			MethodName: "Configure",
			Handler:    _ResourceManagerService_Configure_Handler,
		},
		{
			MethodName: "ClientConnected",
			Handler:    _ResourceManagerService_ClientConnected_Handler,
		},
		{
			MethodName: "ClientFinalized",
			Handler:    _ResourceManagerService_ClientFinalized_Handler,
		},
		{
			MethodName: "Abort",
			Handler:    _ResourceManagerService_Abort_Handler,
		},
		{
			MethodName: "Fence",
			Handler:    _ResourceManagerService_Fence_Handler,
		},
		{
			MethodName: "DirectModex",
			Handler:    _ResourceManagerService_DirectModex_Handler,
		},
		{
			MethodName: "Publish",
			Handler:    _ResourceManagerService_Publish_Handler,
		},
		{
			MethodName: "Lookup",
			Handler:    _ResourceManagerService_Lookup_Handler,
		},
		{
			MethodName: "Unpublish",
			Handler:    _ResourceManagerService_Unpublish_Handler,
		},
		{
			MethodName: "Spawn",
			Handler:    _ResourceManagerService_Spawn_Handler,
		},
		{
			MethodName: "Connect",
			Handler:    _ResourceManagerService_Connect_Handler,
		},
		{
			MethodName: "Disconnect",
			Handler:    _ResourceManagerService_Disconnect_Handler,
		},
		{
			MethodName: "Query",
			Handler:    _ResourceManagerService_Query_Handler,
		},
		{
			MethodName: "Log",
			Handler:    _ResourceManagerService_Log_Handler,
		},
		{
			MethodName: "NotifyEvent",
			Handler:    _ResourceManagerService_NotifyEvent_Handler,
		},
		{
			MethodName: "AwaitEvents",
			Handler:    _ResourceManagerService_AwaitEvents_Handler,
		},
		{
			MethodName: "Depart",
			Handler:    _ResourceManagerService_Depart_Handler,
		},
	},
	Streams:  []grpc.StreamDesc{},
	Metadata: "gopmi/rm/v1/rm.proto",
}
