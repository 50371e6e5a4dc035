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

// Code generated by protoc-gen-go. DO NOT EDIT.
// versions:
// 	protoc-gen-go v1.36.12
// 	protoc        v3.21.12
// source: gopmi/rm/v1/rm.proto

package rmv1

import (
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
	protoimpl "google.golang.org/protobuf/runtime/protoimpl"
	durationpb "google.golang.org/protobuf/types/known/durationpb"
	reflect "reflect"
	sync "sync"
	unsafe "unsafe"
)

const (
	// Verify that this generated code is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(20 - protoimpl.MinVersion)
	// Verify that runtime/protoimpl is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(protoimpl.MaxVersion - 20)
)

// Range scopes a published name or an event (PMIx data range).
type Range int32

const (
	// The backend chooses; it means RANGE_SESSION.
	Range_RANGE_UNSPECIFIED Range = 0
	// Processes on the same node.
	Range_RANGE_LOCAL Range = 1
	// Processes of the publisher's job.
	Range_RANGE_NAMESPACE Range = 2
	// The publisher's job and every job it spawned or that shares its
	// allocation or launcher.
	Range_RANGE_SESSION Range = 3
	// Every job the backend can reach.
	Range_RANGE_GLOBAL Range = 4
)

// Enum value maps for Range.
var (
	Range_name = map[int32]string{
		0: "RANGE_UNSPECIFIED",
		1: "RANGE_LOCAL",
		2: "RANGE_NAMESPACE",
		3: "RANGE_SESSION",
		4: "RANGE_GLOBAL",
	}
	Range_value = map[string]int32{
		"RANGE_UNSPECIFIED": 0,
		"RANGE_LOCAL":       1,
		"RANGE_NAMESPACE":   2,
		"RANGE_SESSION":     3,
		"RANGE_GLOBAL":      4,
	}
)

func (x Range) Enum() *Range {
	p := new(Range)
	*p = x
	return p
}

func (x Range) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Range) Descriptor() protoreflect.EnumDescriptor {
	return file_gopmi_rm_v1_rm_proto_enumTypes[0].Descriptor()
}

func (Range) Type() protoreflect.EnumType {
	return &file_gopmi_rm_v1_rm_proto_enumTypes[0]
}

func (x Range) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Range.Descriptor instead.
func (Range) EnumDescriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{0}
}

// Persistence says how long a published name lives.
type Persistence int32

const (
	// The backend chooses; it means PERSISTENCE_SESSION.
	Persistence_PERSISTENCE_UNSPECIFIED Persistence = 0
	// Until unpublished.
	Persistence_PERSISTENCE_INDEFINITE Persistence = 1
	// Deleted by the first lookup that returns it.
	Persistence_PERSISTENCE_FIRST_READ Persistence = 2
	// Until the publishing process exits.
	Persistence_PERSISTENCE_PROC Persistence = 3
	// Until the publishing job ends.
	Persistence_PERSISTENCE_APP Persistence = 4
	// Until the session (allocation, launcher) ends.
	Persistence_PERSISTENCE_SESSION Persistence = 5
)

// Enum value maps for Persistence.
var (
	Persistence_name = map[int32]string{
		0: "PERSISTENCE_UNSPECIFIED",
		1: "PERSISTENCE_INDEFINITE",
		2: "PERSISTENCE_FIRST_READ",
		3: "PERSISTENCE_PROC",
		4: "PERSISTENCE_APP",
		5: "PERSISTENCE_SESSION",
	}
	Persistence_value = map[string]int32{
		"PERSISTENCE_UNSPECIFIED": 0,
		"PERSISTENCE_INDEFINITE":  1,
		"PERSISTENCE_FIRST_READ":  2,
		"PERSISTENCE_PROC":        3,
		"PERSISTENCE_APP":         4,
		"PERSISTENCE_SESSION":     5,
	}
)

func (x Persistence) Enum() *Persistence {
	p := new(Persistence)
	*p = x
	return p
}

func (x Persistence) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Persistence) Descriptor() protoreflect.EnumDescriptor {
	return file_gopmi_rm_v1_rm_proto_enumTypes[1].Descriptor()
}

func (Persistence) Type() protoreflect.EnumType {
	return &file_gopmi_rm_v1_rm_proto_enumTypes[1]
}

func (x Persistence) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Persistence.Descriptor instead.
func (Persistence) EnumDescriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{1}
}

// Proc names one process: its job (namespace) and its rank in that job.
type Proc struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// nspace is the job's namespace (PMI kvsname / jobid).
	Nspace string `protobuf:"bytes,1,opt,name=nspace,proto3" json:"nspace,omitempty"`
	// rank is the process's rank in nspace; -1 means every rank of nspace.
	Rank          int32 `protobuf:"varint,2,opt,name=rank,proto3" json:"rank,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Proc) Reset() {
	*x = Proc{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[0]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Proc) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Proc) ProtoMessage() {}

func (x *Proc) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[0]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Proc.ProtoReflect.Descriptor instead.
func (*Proc) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{0}
}

func (x *Proc) GetNspace() string {
	if x != nil {
		return x.Nspace
	}
	return ""
}

func (x *Proc) GetRank() int32 {
	if x != nil {
		return x.Rank
	}
	return 0
}

// Info is one key/value datum or directive. PMI keys and values are text.
type Info struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// key names the datum or directive.
	Key string `protobuf:"bytes,1,opt,name=key,proto3" json:"key,omitempty"`
	// value is its value, as text.
	Value         string `protobuf:"bytes,2,opt,name=value,proto3" json:"value,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Info) Reset() {
	*x = Info{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[1]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Info) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Info) ProtoMessage() {}

func (x *Info) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[1]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Info.ProtoReflect.Descriptor instead.
func (*Info) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{1}
}

func (x *Info) GetKey() string {
	if x != nil {
		return x.Key
	}
	return ""
}

func (x *Info) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

// GetInfoRequest is empty; it exists so that fields can be added.
type GetInfoRequest struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *GetInfoRequest) Reset() {
	*x = GetInfoRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[2]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *GetInfoRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GetInfoRequest) ProtoMessage() {}

func (x *GetInfoRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[2]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GetInfoRequest.ProtoReflect.Descriptor instead.
func (*GetInfoRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{2}
}

// GetInfoResponse describes a backend to the host.
type GetInfoResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// name is the backend's short name, e.g. "local", "slurm".
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// version is the backend's own version, for logs.
	Version string `protobuf:"bytes,2,opt,name=version,proto3" json:"version,omitempty"`
	// api_versions are the contract versions the backend speaks; "1.0" is
	// this file. The host picks one and sends it in Configure.
	ApiVersions []string `protobuf:"bytes,3,rep,name=api_versions,json=apiVersions,proto3" json:"api_versions,omitempty"`
	// capabilities names the optional call groups the backend implements:
	// "publish" (Publish, Lookup, Unpublish), "spawn" (Spawn), "connect"
	// (Connect, Disconnect), "query" (Query), "log" (Log), "notify"
	// (NotifyEvent), "events" (AwaitEvents). Calls of a group not listed
	// answer UNIMPLEMENTED.
	Capabilities  []string `protobuf:"bytes,4,rep,name=capabilities,proto3" json:"capabilities,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *GetInfoResponse) Reset() {
	*x = GetInfoResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[3]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *GetInfoResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GetInfoResponse) ProtoMessage() {}

func (x *GetInfoResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[3]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GetInfoResponse.ProtoReflect.Descriptor instead.
func (*GetInfoResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{3}
}

func (x *GetInfoResponse) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *GetInfoResponse) GetVersion() string {
	if x != nil {
		return x.Version
	}
	return ""
}

func (x *GetInfoResponse) GetApiVersions() []string {
	if x != nil {
		return x.ApiVersions
	}
	return nil
}

func (x *GetInfoResponse) GetCapabilities() []string {
	if x != nil {
		return x.Capabilities
	}
	return nil
}

// Node is one node of a job and the ranks it hosts.
type Node struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// id is the node's index, unique within the job.
	Id int32 `protobuf:"varint,1,opt,name=id,proto3" json:"id,omitempty"`
	// name is the node's host name, for messages and PMI_process_mapping.
	Name string `protobuf:"bytes,2,opt,name=name,proto3" json:"name,omitempty"`
	// ranks are the ranks of the job this node hosts.
	Ranks []int32 `protobuf:"varint,3,rep,packed,name=ranks,proto3" json:"ranks,omitempty"`
	// addr is the node's network address as the resource manager knows it
	// (Slurm's NodeAddr), when it gives one: a backend that links its
	// nodes to each other dials it. Empty: name is the address. Added in
	// 1.1; a 1.0 peer ignores it.
	Addr          string `protobuf:"bytes,4,opt,name=addr,proto3" json:"addr,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Node) Reset() {
	*x = Node{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[4]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Node) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Node) ProtoMessage() {}

func (x *Node) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[4]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Node.ProtoReflect.Descriptor instead.
func (*Node) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{4}
}

func (x *Node) GetId() int32 {
	if x != nil {
		return x.Id
	}
	return 0
}

func (x *Node) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *Node) GetRanks() []int32 {
	if x != nil {
		return x.Ranks
	}
	return nil
}

func (x *Node) GetAddr() string {
	if x != nil {
		return x.Addr
	}
	return ""
}

// App is one executable of a job: its ranks are first_rank to
// first_rank+size-1, or those in ranks when it is set, and its MPI_APPNUM
// is its index in Job.apps.
type App struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// first_rank is the app's lowest rank.
	FirstRank int32 `protobuf:"varint,1,opt,name=first_rank,json=firstRank,proto3" json:"first_rank,omitempty"`
	// size is the number of ranks running this app.
	Size int32 `protobuf:"varint,2,opt,name=size,proto3" json:"size,omitempty"`
	// cmd is the executable, for messages.
	Cmd string `protobuf:"bytes,3,opt,name=cmd,proto3" json:"cmd,omitempty"`
	// ranks, when set, are the app's ranks, in any order, not necessarily
	// consecutive (srun --multi-prog "0,2 a.out"); size is their number and
	// first_rank their lowest.
	Ranks         []int32 `protobuf:"varint,4,rep,packed,name=ranks,proto3" json:"ranks,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *App) Reset() {
	*x = App{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[5]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *App) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*App) ProtoMessage() {}

func (x *App) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[5]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use App.ProtoReflect.Descriptor instead.
func (*App) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{5}
}

func (x *App) GetFirstRank() int32 {
	if x != nil {
		return x.FirstRank
	}
	return 0
}

func (x *App) GetSize() int32 {
	if x != nil {
		return x.Size
	}
	return 0
}

func (x *App) GetCmd() string {
	if x != nil {
		return x.Cmd
	}
	return ""
}

func (x *App) GetRanks() []int32 {
	if x != nil {
		return x.Ranks
	}
	return nil
}

// Job is the layout of a job as the host knows it.
type Job struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// nspace is the job's namespace.
	Nspace string `protobuf:"bytes,1,opt,name=nspace,proto3" json:"nspace,omitempty"`
	// size is the number of ranks.
	Size int32 `protobuf:"varint,2,opt,name=size,proto3" json:"size,omitempty"`
	// universe_size is the MPI universe size (0: same as size).
	UniverseSize int32 `protobuf:"varint,3,opt,name=universe_size,json=universeSize,proto3" json:"universe_size,omitempty"`
	// nodes are every node of the job, with the ranks each hosts.
	Nodes []*Node `protobuf:"bytes,4,rep,name=nodes,proto3" json:"nodes,omitempty"`
	// apps are the job's executables in MPI_APPNUM order.
	Apps []*App `protobuf:"bytes,5,rep,name=apps,proto3" json:"apps,omitempty"`
	// parent is the namespace of the job that spawned this one; empty if none.
	Parent        string `protobuf:"bytes,6,opt,name=parent,proto3" json:"parent,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Job) Reset() {
	*x = Job{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[6]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Job) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Job) ProtoMessage() {}

func (x *Job) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[6]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Job.ProtoReflect.Descriptor instead.
func (*Job) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{6}
}

func (x *Job) GetNspace() string {
	if x != nil {
		return x.Nspace
	}
	return ""
}

func (x *Job) GetSize() int32 {
	if x != nil {
		return x.Size
	}
	return 0
}

func (x *Job) GetUniverseSize() int32 {
	if x != nil {
		return x.UniverseSize
	}
	return 0
}

func (x *Job) GetNodes() []*Node {
	if x != nil {
		return x.Nodes
	}
	return nil
}

func (x *Job) GetApps() []*App {
	if x != nil {
		return x.Apps
	}
	return nil
}

func (x *Job) GetParent() string {
	if x != nil {
		return x.Parent
	}
	return ""
}

// ConfigureRequest registers the calling shim's job and node.
type ConfigureRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// api_version is the contract version the host chose from
	// GetInfoResponse.api_versions.
	ApiVersion string `protobuf:"bytes,1,opt,name=api_version,json=apiVersion,proto3" json:"api_version,omitempty"`
	// job is the layout of the caller's job.
	Job *Job `protobuf:"bytes,2,opt,name=job,proto3" json:"job,omitempty"`
	// node_id is the caller's entry in job.nodes (its Node.id).
	NodeId int32 `protobuf:"varint,3,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// config is backend-specific configuration, opaque to gopmi (e.g. JSON).
	Config        []byte `protobuf:"bytes,4,opt,name=config,proto3" json:"config,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ConfigureRequest) Reset() {
	*x = ConfigureRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[7]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ConfigureRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ConfigureRequest) ProtoMessage() {}

func (x *ConfigureRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[7]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ConfigureRequest.ProtoReflect.Descriptor instead.
func (*ConfigureRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{7}
}

func (x *ConfigureRequest) GetApiVersion() string {
	if x != nil {
		return x.ApiVersion
	}
	return ""
}

func (x *ConfigureRequest) GetJob() *Job {
	if x != nil {
		return x.Job
	}
	return nil
}

func (x *ConfigureRequest) GetNodeId() int32 {
	if x != nil {
		return x.NodeId
	}
	return 0
}

func (x *ConfigureRequest) GetConfig() []byte {
	if x != nil {
		return x.Config
	}
	return nil
}

// ConfigureResponse may add job attributes the backend owns.
type ConfigureResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// attrs are served to tasks as job attributes (PMI-2 info-getjobattr,
	// PMI-1 get), e.g. PMI_hwloc_xmlfile.
	Attrs         []*Info `protobuf:"bytes,1,rep,name=attrs,proto3" json:"attrs,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ConfigureResponse) Reset() {
	*x = ConfigureResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[8]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ConfigureResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ConfigureResponse) ProtoMessage() {}

func (x *ConfigureResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[8]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ConfigureResponse.ProtoReflect.Descriptor instead.
func (*ConfigureResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{8}
}

func (x *ConfigureResponse) GetAttrs() []*Info {
	if x != nil {
		return x.Attrs
	}
	return nil
}

// ClientConnectedRequest reports that tasks initialized PMI. The host
// batches the tasks of one node that initialized close together into one
// call.
type ClientConnectedRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// procs are the tasks, in the order they initialized.
	Procs []*Proc `protobuf:"bytes,1,rep,name=procs,proto3" json:"procs,omitempty"`
	// info carries extra detail, if any.
	Info          []*Info `protobuf:"bytes,2,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ClientConnectedRequest) Reset() {
	*x = ClientConnectedRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[9]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClientConnectedRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClientConnectedRequest) ProtoMessage() {}

func (x *ClientConnectedRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[9]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClientConnectedRequest.ProtoReflect.Descriptor instead.
func (*ClientConnectedRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{9}
}

func (x *ClientConnectedRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *ClientConnectedRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// ClientConnectedResponse is empty.
type ClientConnectedResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ClientConnectedResponse) Reset() {
	*x = ClientConnectedResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[10]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClientConnectedResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClientConnectedResponse) ProtoMessage() {}

func (x *ClientConnectedResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[10]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClientConnectedResponse.ProtoReflect.Descriptor instead.
func (*ClientConnectedResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{10}
}

// ClientFinalizedRequest reports that tasks finalized PMI, batched like
// ClientConnectedRequest. A task is always reported connected before it is
// reported finalized.
type ClientFinalizedRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// procs are the tasks, in the order they finalized.
	Procs []*Proc `protobuf:"bytes,1,rep,name=procs,proto3" json:"procs,omitempty"`
	// info carries extra detail, if any.
	Info          []*Info `protobuf:"bytes,2,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ClientFinalizedRequest) Reset() {
	*x = ClientFinalizedRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[11]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClientFinalizedRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClientFinalizedRequest) ProtoMessage() {}

func (x *ClientFinalizedRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[11]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClientFinalizedRequest.ProtoReflect.Descriptor instead.
func (*ClientFinalizedRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{11}
}

func (x *ClientFinalizedRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *ClientFinalizedRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// ClientFinalizedResponse is empty.
type ClientFinalizedResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ClientFinalizedResponse) Reset() {
	*x = ClientFinalizedResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[12]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ClientFinalizedResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ClientFinalizedResponse) ProtoMessage() {}

func (x *ClientFinalizedResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[12]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ClientFinalizedResponse.ProtoReflect.Descriptor instead.
func (*ClientFinalizedResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{12}
}

// AbortRequest asks the RM to end processes with an exit status.
type AbortRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the process that asked.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// status is the exit status the job should end with.
	Status int32 `protobuf:"varint,2,opt,name=status,proto3" json:"status,omitempty"`
	// message is the human-readable reason.
	Message string `protobuf:"bytes,3,opt,name=message,proto3" json:"message,omitempty"`
	// targets are the processes to end; empty means proc's whole job.
	Targets       []*Proc `protobuf:"bytes,4,rep,name=targets,proto3" json:"targets,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AbortRequest) Reset() {
	*x = AbortRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[13]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AbortRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AbortRequest) ProtoMessage() {}

func (x *AbortRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[13]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AbortRequest.ProtoReflect.Descriptor instead.
func (*AbortRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{13}
}

func (x *AbortRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *AbortRequest) GetStatus() int32 {
	if x != nil {
		return x.Status
	}
	return 0
}

func (x *AbortRequest) GetMessage() string {
	if x != nil {
		return x.Message
	}
	return ""
}

func (x *AbortRequest) GetTargets() []*Proc {
	if x != nil {
		return x.Targets
	}
	return nil
}

// AbortResponse is empty.
type AbortResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AbortResponse) Reset() {
	*x = AbortResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[14]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AbortResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AbortResponse) ProtoMessage() {}

func (x *AbortResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[14]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AbortResponse.ProtoReflect.Descriptor instead.
func (*AbortResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{14}
}

// FenceRequest is one node's part of a collective. The host calls Fence once
// per node per fence, after every local participant arrived, and only when
// the participants span more than one node. One exception: a host hands the
// backend data of some or all of a node's processes for DirectModex as a
// fence whose participants are all local (procs and local_procs the same),
// without collect, which the backend completes at once and keeps like any
// other contribution: a job on one node publishes its fence data for other
// jobs so (id "publish:<node>/<n>"), once its backend is up, and the PMIx face
// its clients' data when they first commit or connect to another job (id
// "pmix:modex:<node>/<n>").
type FenceRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// id names the collective; it is the same on every node for the same
	// fence (e.g. "world/3"), so the backend matches calls by (nspace, id).
	Id string `protobuf:"bytes,1,opt,name=id,proto3" json:"id,omitempty"`
	// procs are all participants; {nspace, -1} means every rank of nspace.
	Procs []*Proc `protobuf:"bytes,2,rep,name=procs,proto3" json:"procs,omitempty"`
	// local_procs are the participants the calling node hosts: the backend
	// counts arrivals with them and names the missing ones on a time-out.
	LocalProcs []*Proc `protobuf:"bytes,3,rep,name=local_procs,json=localProcs,proto3" json:"local_procs,omitempty"`
	// node is the caller's node name, for messages.
	Node string `protobuf:"bytes,4,opt,name=node,proto3" json:"node,omitempty"`
	// data is the node's contribution, an opaque blob. Blobs of several nodes
	// concatenated in any order must stay parseable, so the backend may just
	// concatenate them. It can be hundreds of MiB for large jobs.
	Data []byte `protobuf:"bytes,5,opt,name=data,proto3" json:"data,omitempty"`
	// collect asks for every participating node's data in the response.
	// Without it the backend keeps each node's data for DirectModex and
	// returns none: a barrier.
	Collect bool `protobuf:"varint,6,opt,name=collect,proto3" json:"collect,omitempty"`
	// timeout bounds the whole collective; on expiry the backend answers
	// DEADLINE_EXCEEDED naming the procs or nodes missing. Unset: no bound
	// beyond the call's deadline.
	Timeout *durationpb.Duration `protobuf:"bytes,7,opt,name=timeout,proto3" json:"timeout,omitempty"`
	// hand_over (new in 1.3): the fence is a node's hand-over of its own
	// processes' data, not a collective: every participant is among
	// local_procs, nothing is collected, and the backend keeps data readable
	// by direct modex and answers at once. A backend before 1.3 ignores it
	// and completes the fence of one node it is, which is the same thing.
	HandOver      bool `protobuf:"varint,8,opt,name=hand_over,json=handOver,proto3" json:"hand_over,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *FenceRequest) Reset() {
	*x = FenceRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[15]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *FenceRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*FenceRequest) ProtoMessage() {}

func (x *FenceRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[15]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use FenceRequest.ProtoReflect.Descriptor instead.
func (*FenceRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{15}
}

func (x *FenceRequest) GetId() string {
	if x != nil {
		return x.Id
	}
	return ""
}

func (x *FenceRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *FenceRequest) GetLocalProcs() []*Proc {
	if x != nil {
		return x.LocalProcs
	}
	return nil
}

func (x *FenceRequest) GetNode() string {
	if x != nil {
		return x.Node
	}
	return ""
}

func (x *FenceRequest) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *FenceRequest) GetCollect() bool {
	if x != nil {
		return x.Collect
	}
	return false
}

func (x *FenceRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

func (x *FenceRequest) GetHandOver() bool {
	if x != nil {
		return x.HandOver
	}
	return false
}

// FenceResponse is the result of a fence.
type FenceResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// data is the concatenation, in any order, of the data of every
	// participating node when collect was set; empty otherwise.
	Data          []byte `protobuf:"bytes,1,opt,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *FenceResponse) Reset() {
	*x = FenceResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[16]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *FenceResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*FenceResponse) ProtoMessage() {}

func (x *FenceResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[16]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use FenceResponse.ProtoReflect.Descriptor instead.
func (*FenceResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{16}
}

func (x *FenceResponse) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

// DirectModexRequest fetches the data a remote process contributed; the
// answer is the blobs its node contributed to the job's fences so far,
// concatenated.
type DirectModexRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// requestor is the process that asked.
	Requestor *Proc `protobuf:"bytes,1,opt,name=requestor,proto3" json:"requestor,omitempty"`
	// proc is the process whose data is wanted; rank -1 (wildcard) asks for
	// every node's data (PMI-1 gets name no owner). Its nspace may be
	// another job's.
	Proc *Proc `protobuf:"bytes,2,opt,name=proc,proto3" json:"proc,omitempty"`
	// key is unused: hosts leave it empty and backends ignore it. The data is
	// opaque to a backend, which cannot tell whether a key is in it; the
	// field stays for compatibility within v1.
	Key string `protobuf:"bytes,3,opt,name=key,proto3" json:"key,omitempty"`
	// timeout bounds the wait for the target's node to contribute (zero: the
	// default fence time-out, 120s); on expiry the answer is
	// DEADLINE_EXCEEDED naming the node. A job the backend does not know is
	// NOT_FOUND at once. For the wildcard, the requestor's own node is not
	// waited for.
	Timeout       *durationpb.Duration `protobuf:"bytes,4,opt,name=timeout,proto3" json:"timeout,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DirectModexRequest) Reset() {
	*x = DirectModexRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[17]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DirectModexRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DirectModexRequest) ProtoMessage() {}

func (x *DirectModexRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[17]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DirectModexRequest.ProtoReflect.Descriptor instead.
func (*DirectModexRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{17}
}

func (x *DirectModexRequest) GetRequestor() *Proc {
	if x != nil {
		return x.Requestor
	}
	return nil
}

func (x *DirectModexRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *DirectModexRequest) GetKey() string {
	if x != nil {
		return x.Key
	}
	return ""
}

func (x *DirectModexRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

// DirectModexResponse carries the target's data.
type DirectModexResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// data is the concatenation of the blobs the target's node contributed
	// to the job's fences so far; for rank -1, every node's.
	Data          []byte `protobuf:"bytes,1,opt,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DirectModexResponse) Reset() {
	*x = DirectModexResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[18]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DirectModexResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DirectModexResponse) ProtoMessage() {}

func (x *DirectModexResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[18]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DirectModexResponse.ProtoReflect.Descriptor instead.
func (*DirectModexResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{18}
}

func (x *DirectModexResponse) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

// PublishRequest publishes names (MPI_Publish_name).
type PublishRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the publishing process.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// data are the names (keys) and their values (e.g. port names).
	Data []*Info `protobuf:"bytes,2,rep,name=data,proto3" json:"data,omitempty"`
	// range scopes who can look the names up.
	Range Range `protobuf:"varint,3,opt,name=range,proto3,enum=gopmi.rm.v1.Range" json:"range,omitempty"`
	// persistence says how long the names live.
	Persistence Persistence `protobuf:"varint,4,opt,name=persistence,proto3,enum=gopmi.rm.v1.Persistence" json:"persistence,omitempty"`
	// info are other directives; the backend refuses unknown ones by name
	// with UNIMPLEMENTED.
	Info          []*Info `protobuf:"bytes,5,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *PublishRequest) Reset() {
	*x = PublishRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[19]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *PublishRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*PublishRequest) ProtoMessage() {}

func (x *PublishRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[19]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use PublishRequest.ProtoReflect.Descriptor instead.
func (*PublishRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{19}
}

func (x *PublishRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *PublishRequest) GetData() []*Info {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *PublishRequest) GetRange() Range {
	if x != nil {
		return x.Range
	}
	return Range_RANGE_UNSPECIFIED
}

func (x *PublishRequest) GetPersistence() Persistence {
	if x != nil {
		return x.Persistence
	}
	return Persistence_PERSISTENCE_UNSPECIFIED
}

func (x *PublishRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// PublishResponse is empty.
type PublishResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *PublishResponse) Reset() {
	*x = PublishResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[20]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *PublishResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*PublishResponse) ProtoMessage() {}

func (x *PublishResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[20]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use PublishResponse.ProtoReflect.Descriptor instead.
func (*PublishResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{20}
}

// LookupRequest looks names up (MPI_Lookup_name).
type LookupRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the process looking up.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// keys are the names wanted.
	Keys []string `protobuf:"bytes,2,rep,name=keys,proto3" json:"keys,omitempty"`
	// range scopes the search.
	Range Range `protobuf:"varint,3,opt,name=range,proto3,enum=gopmi.rm.v1.Range" json:"range,omitempty"`
	// wait asks the backend to wait until every key is published or timeout
	// passes.
	Wait bool `protobuf:"varint,4,opt,name=wait,proto3" json:"wait,omitempty"`
	// timeout bounds the wait.
	Timeout *durationpb.Duration `protobuf:"bytes,5,opt,name=timeout,proto3" json:"timeout,omitempty"`
	// info are other directives.
	Info          []*Info `protobuf:"bytes,6,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LookupRequest) Reset() {
	*x = LookupRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[21]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LookupRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LookupRequest) ProtoMessage() {}

func (x *LookupRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[21]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LookupRequest.ProtoReflect.Descriptor instead.
func (*LookupRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{21}
}

func (x *LookupRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *LookupRequest) GetKeys() []string {
	if x != nil {
		return x.Keys
	}
	return nil
}

func (x *LookupRequest) GetRange() Range {
	if x != nil {
		return x.Range
	}
	return Range_RANGE_UNSPECIFIED
}

func (x *LookupRequest) GetWait() bool {
	if x != nil {
		return x.Wait
	}
	return false
}

func (x *LookupRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

func (x *LookupRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// Published is one name found by Lookup.
type Published struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// key is the name.
	Key string `protobuf:"bytes,1,opt,name=key,proto3" json:"key,omitempty"`
	// value is its published value.
	Value string `protobuf:"bytes,2,opt,name=value,proto3" json:"value,omitempty"`
	// publisher is the process that published it.
	Publisher     *Proc `protobuf:"bytes,3,opt,name=publisher,proto3" json:"publisher,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Published) Reset() {
	*x = Published{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[22]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Published) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Published) ProtoMessage() {}

func (x *Published) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[22]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Published.ProtoReflect.Descriptor instead.
func (*Published) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{22}
}

func (x *Published) GetKey() string {
	if x != nil {
		return x.Key
	}
	return ""
}

func (x *Published) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

func (x *Published) GetPublisher() *Proc {
	if x != nil {
		return x.Publisher
	}
	return nil
}

// LookupResponse holds what was found. A key not found is left out; a lookup
// that found none of its keys fails with NOT_FOUND instead.
type LookupResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// data are the names found.
	Data          []*Published `protobuf:"bytes,1,rep,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LookupResponse) Reset() {
	*x = LookupResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[23]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LookupResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LookupResponse) ProtoMessage() {}

func (x *LookupResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[23]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LookupResponse.ProtoReflect.Descriptor instead.
func (*LookupResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{23}
}

func (x *LookupResponse) GetData() []*Published {
	if x != nil {
		return x.Data
	}
	return nil
}

// UnpublishRequest removes names.
type UnpublishRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the process that published them.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// keys are the names to remove; empty means every name proc published in
	// range.
	Keys []string `protobuf:"bytes,2,rep,name=keys,proto3" json:"keys,omitempty"`
	// range is the range they were published in.
	Range Range `protobuf:"varint,3,opt,name=range,proto3,enum=gopmi.rm.v1.Range" json:"range,omitempty"`
	// info are other directives.
	Info          []*Info `protobuf:"bytes,4,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *UnpublishRequest) Reset() {
	*x = UnpublishRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[24]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *UnpublishRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*UnpublishRequest) ProtoMessage() {}

func (x *UnpublishRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[24]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use UnpublishRequest.ProtoReflect.Descriptor instead.
func (*UnpublishRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{24}
}

func (x *UnpublishRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *UnpublishRequest) GetKeys() []string {
	if x != nil {
		return x.Keys
	}
	return nil
}

func (x *UnpublishRequest) GetRange() Range {
	if x != nil {
		return x.Range
	}
	return Range_RANGE_UNSPECIFIED
}

func (x *UnpublishRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// UnpublishResponse is empty.
type UnpublishResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *UnpublishResponse) Reset() {
	*x = UnpublishResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[25]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *UnpublishResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*UnpublishResponse) ProtoMessage() {}

func (x *UnpublishResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[25]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use UnpublishResponse.ProtoReflect.Descriptor instead.
func (*UnpublishResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{25}
}

// SpawnApp is one executable of a spawn request.
type SpawnApp struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// cmd is the executable.
	Cmd string `protobuf:"bytes,1,opt,name=cmd,proto3" json:"cmd,omitempty"`
	// argv are its arguments, not including cmd.
	Argv []string `protobuf:"bytes,2,rep,name=argv,proto3" json:"argv,omitempty"`
	// env are KEY=VALUE strings added to the spawned tasks' environment.
	Env []string `protobuf:"bytes,3,rep,name=env,proto3" json:"env,omitempty"`
	// cwd is the working directory; empty means the backend's choice.
	Cwd string `protobuf:"bytes,4,opt,name=cwd,proto3" json:"cwd,omitempty"`
	// max_procs is the number of processes to start.
	MaxProcs int32 `protobuf:"varint,5,opt,name=max_procs,json=maxProcs,proto3" json:"max_procs,omitempty"`
	// info holds the remaining PMI info keys of this command. The backend
	// honours each key or refuses the spawn with UNIMPLEMENTED naming it.
	Info          []*Info `protobuf:"bytes,6,rep,name=info,proto3" json:"info,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SpawnApp) Reset() {
	*x = SpawnApp{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[26]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SpawnApp) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SpawnApp) ProtoMessage() {}

func (x *SpawnApp) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[26]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SpawnApp.ProtoReflect.Descriptor instead.
func (*SpawnApp) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{26}
}

func (x *SpawnApp) GetCmd() string {
	if x != nil {
		return x.Cmd
	}
	return ""
}

func (x *SpawnApp) GetArgv() []string {
	if x != nil {
		return x.Argv
	}
	return nil
}

func (x *SpawnApp) GetEnv() []string {
	if x != nil {
		return x.Env
	}
	return nil
}

func (x *SpawnApp) GetCwd() string {
	if x != nil {
		return x.Cwd
	}
	return ""
}

func (x *SpawnApp) GetMaxProcs() int32 {
	if x != nil {
		return x.MaxProcs
	}
	return 0
}

func (x *SpawnApp) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

// SpawnRequest starts a new job (MPI_Comm_spawn, MPI_Comm_spawn_multiple).
type SpawnRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// requestor is the process that asked.
	Requestor *Proc `protobuf:"bytes,1,opt,name=requestor,proto3" json:"requestor,omitempty"`
	// job_info are job-level info keys; honoured or refused by name.
	JobInfo []*Info `protobuf:"bytes,2,rep,name=job_info,json=jobInfo,proto3" json:"job_info,omitempty"`
	// apps are the executables, in MPI_APPNUM order.
	Apps []*SpawnApp `protobuf:"bytes,3,rep,name=apps,proto3" json:"apps,omitempty"`
	// preput are key/values in the new job's KVS before its tasks start.
	Preput []*Info `protobuf:"bytes,4,rep,name=preput,proto3" json:"preput,omitempty"`
	// timeout bounds the spawn until the new job's tasks are started.
	Timeout       *durationpb.Duration `protobuf:"bytes,5,opt,name=timeout,proto3" json:"timeout,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SpawnRequest) Reset() {
	*x = SpawnRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[27]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SpawnRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SpawnRequest) ProtoMessage() {}

func (x *SpawnRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[27]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SpawnRequest.ProtoReflect.Descriptor instead.
func (*SpawnRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{27}
}

func (x *SpawnRequest) GetRequestor() *Proc {
	if x != nil {
		return x.Requestor
	}
	return nil
}

func (x *SpawnRequest) GetJobInfo() []*Info {
	if x != nil {
		return x.JobInfo
	}
	return nil
}

func (x *SpawnRequest) GetApps() []*SpawnApp {
	if x != nil {
		return x.Apps
	}
	return nil
}

func (x *SpawnRequest) GetPreput() []*Info {
	if x != nil {
		return x.Preput
	}
	return nil
}

func (x *SpawnRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

// SpawnResponse names the new job.
type SpawnResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// nspace is the new job's namespace.
	Nspace        string `protobuf:"bytes,1,opt,name=nspace,proto3" json:"nspace,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SpawnResponse) Reset() {
	*x = SpawnResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[28]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SpawnResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SpawnResponse) ProtoMessage() {}

func (x *SpawnResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[28]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SpawnResponse.ProtoReflect.Descriptor instead.
func (*SpawnResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{28}
}

func (x *SpawnResponse) GetNspace() string {
	if x != nil {
		return x.Nspace
	}
	return ""
}

// ConnectRequest connects processes of several jobs (PMIx RFC0003).
type ConnectRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// procs are the participants; {nspace, -1} means every rank of nspace.
	Procs []*Proc `protobuf:"bytes,1,rep,name=procs,proto3" json:"procs,omitempty"`
	// info are directives (e.g. the connect id).
	Info []*Info `protobuf:"bytes,2,rep,name=info,proto3" json:"info,omitempty"`
	// timeout bounds the wait for every participant.
	Timeout       *durationpb.Duration `protobuf:"bytes,3,opt,name=timeout,proto3" json:"timeout,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ConnectRequest) Reset() {
	*x = ConnectRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[29]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ConnectRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ConnectRequest) ProtoMessage() {}

func (x *ConnectRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[29]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ConnectRequest.ProtoReflect.Descriptor instead.
func (*ConnectRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{29}
}

func (x *ConnectRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *ConnectRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

func (x *ConnectRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

// ConnectResponse identifies the connection.
type ConnectResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// id names the connection, the same for every participant.
	Id            string `protobuf:"bytes,1,opt,name=id,proto3" json:"id,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ConnectResponse) Reset() {
	*x = ConnectResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[30]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ConnectResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ConnectResponse) ProtoMessage() {}

func (x *ConnectResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[30]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ConnectResponse.ProtoReflect.Descriptor instead.
func (*ConnectResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{30}
}

func (x *ConnectResponse) GetId() string {
	if x != nil {
		return x.Id
	}
	return ""
}

// DisconnectRequest undoes a Connect.
type DisconnectRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// procs are the participants of the connection.
	Procs []*Proc `protobuf:"bytes,1,rep,name=procs,proto3" json:"procs,omitempty"`
	// info are directives.
	Info []*Info `protobuf:"bytes,2,rep,name=info,proto3" json:"info,omitempty"`
	// timeout bounds the wait for every participant.
	Timeout       *durationpb.Duration `protobuf:"bytes,3,opt,name=timeout,proto3" json:"timeout,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DisconnectRequest) Reset() {
	*x = DisconnectRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[31]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DisconnectRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DisconnectRequest) ProtoMessage() {}

func (x *DisconnectRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[31]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DisconnectRequest.ProtoReflect.Descriptor instead.
func (*DisconnectRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{31}
}

func (x *DisconnectRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *DisconnectRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

func (x *DisconnectRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

// DisconnectResponse is empty.
type DisconnectResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DisconnectResponse) Reset() {
	*x = DisconnectResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[32]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DisconnectResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DisconnectResponse) ProtoMessage() {}

func (x *DisconnectResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[32]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DisconnectResponse.ProtoReflect.Descriptor instead.
func (*DisconnectResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{32}
}

// Query is one question: keys and the qualifiers that scope them.
type Query struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// keys are the attributes asked for.
	Keys []string `protobuf:"bytes,1,rep,name=keys,proto3" json:"keys,omitempty"`
	// qualifiers scope them (e.g. a namespace, a node id).
	Qualifiers    []*Info `protobuf:"bytes,2,rep,name=qualifiers,proto3" json:"qualifiers,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Query) Reset() {
	*x = Query{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[33]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Query) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Query) ProtoMessage() {}

func (x *Query) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[33]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Query.ProtoReflect.Descriptor instead.
func (*Query) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{33}
}

func (x *Query) GetKeys() []string {
	if x != nil {
		return x.Keys
	}
	return nil
}

func (x *Query) GetQualifiers() []*Info {
	if x != nil {
		return x.Qualifiers
	}
	return nil
}

// QueryRequest asks the RM about jobs, processes and nodes.
type QueryRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the process asking.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// queries are the questions.
	Queries       []*Query `protobuf:"bytes,2,rep,name=queries,proto3" json:"queries,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *QueryRequest) Reset() {
	*x = QueryRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[34]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *QueryRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*QueryRequest) ProtoMessage() {}

func (x *QueryRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[34]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use QueryRequest.ProtoReflect.Descriptor instead.
func (*QueryRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{34}
}

func (x *QueryRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *QueryRequest) GetQueries() []*Query {
	if x != nil {
		return x.Queries
	}
	return nil
}

// QueryResponse answers with key/values. A key the backend cannot answer is
// left out; a request none of whose keys it knows fails with NOT_FOUND.
type QueryResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// results are the answers.
	Results       []*Info `protobuf:"bytes,1,rep,name=results,proto3" json:"results,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *QueryResponse) Reset() {
	*x = QueryResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[35]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *QueryResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*QueryResponse) ProtoMessage() {}

func (x *QueryResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[35]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use QueryResponse.ProtoReflect.Descriptor instead.
func (*QueryResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{35}
}

func (x *QueryResponse) GetResults() []*Info {
	if x != nil {
		return x.Results
	}
	return nil
}

// LogRequest logs on a process's behalf.
type LogRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// proc is the process logging.
	Proc *Proc `protobuf:"bytes,1,opt,name=proc,proto3" json:"proc,omitempty"`
	// data are the key/values to log (e.g. "stderr" -> text).
	Data []*Info `protobuf:"bytes,2,rep,name=data,proto3" json:"data,omitempty"`
	// directives say where and how to log.
	Directives    []*Info `protobuf:"bytes,3,rep,name=directives,proto3" json:"directives,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LogRequest) Reset() {
	*x = LogRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[36]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LogRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LogRequest) ProtoMessage() {}

func (x *LogRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[36]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LogRequest.ProtoReflect.Descriptor instead.
func (*LogRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{36}
}

func (x *LogRequest) GetProc() *Proc {
	if x != nil {
		return x.Proc
	}
	return nil
}

func (x *LogRequest) GetData() []*Info {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *LogRequest) GetDirectives() []*Info {
	if x != nil {
		return x.Directives
	}
	return nil
}

// LogResponse is empty.
type LogResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LogResponse) Reset() {
	*x = LogResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[37]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LogResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LogResponse) ProtoMessage() {}

func (x *LogResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[37]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LogResponse.ProtoReflect.Descriptor instead.
func (*LogResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{37}
}

// NotifyEventRequest reports an event beyond the node.
type NotifyEventRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// code names the event: "proc-aborted" (a task ended before finalize, or
	// aborted), "proc-terminated" (a task finalized and its connection
	// closed), "pmix:<status>" (a client's event for processes beyond its
	// node, kept for AwaitEvents by a backend with "events"); backends
	// ignore codes they do not know.
	Code string `protobuf:"bytes,1,opt,name=code,proto3" json:"code,omitempty"`
	// source is the process the event is about.
	Source *Proc `protobuf:"bytes,2,opt,name=source,proto3" json:"source,omitempty"`
	// range scopes who should hear of it.
	Range Range `protobuf:"varint,3,opt,name=range,proto3,enum=gopmi.rm.v1.Range" json:"range,omitempty"`
	// info carries detail (e.g. an exit status).
	Info []*Info `protobuf:"bytes,4,rep,name=info,proto3" json:"info,omitempty"`
	// node is the node whose host reports it (new in 1.1): it gave the
	// event to its own clients already.
	Node          string `protobuf:"bytes,5,opt,name=node,proto3" json:"node,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NotifyEventRequest) Reset() {
	*x = NotifyEventRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[38]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NotifyEventRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NotifyEventRequest) ProtoMessage() {}

func (x *NotifyEventRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[38]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NotifyEventRequest.ProtoReflect.Descriptor instead.
func (*NotifyEventRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{38}
}

func (x *NotifyEventRequest) GetCode() string {
	if x != nil {
		return x.Code
	}
	return ""
}

func (x *NotifyEventRequest) GetSource() *Proc {
	if x != nil {
		return x.Source
	}
	return nil
}

func (x *NotifyEventRequest) GetRange() Range {
	if x != nil {
		return x.Range
	}
	return Range_RANGE_UNSPECIFIED
}

func (x *NotifyEventRequest) GetInfo() []*Info {
	if x != nil {
		return x.Info
	}
	return nil
}

func (x *NotifyEventRequest) GetNode() string {
	if x != nil {
		return x.Node
	}
	return ""
}

// NotifyEventResponse is empty.
type NotifyEventResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NotifyEventResponse) Reset() {
	*x = NotifyEventResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[39]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NotifyEventResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NotifyEventResponse) ProtoMessage() {}

func (x *NotifyEventResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[39]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NotifyEventResponse.ProtoReflect.Descriptor instead.
func (*NotifyEventResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{39}
}

// AwaitEventsRequest asks for the clients' events a job's processes are
// to hear: those whose source is in the job, of range NAMESPACE, and
// those of range SESSION, GLOBAL or DEFAULT from any job.
type AwaitEventsRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// nspace is the job.
	Nspace string `protobuf:"bytes,1,opt,name=nspace,proto3" json:"nspace,omitempty"`
	// after is the seq of the last event the caller has; 0: from the
	// oldest kept.
	After uint64 `protobuf:"varint,2,opt,name=after,proto3" json:"after,omitempty"`
	// timeout is how long to wait when there is none after after; zero:
	// answer at once.
	Timeout       *durationpb.Duration `protobuf:"bytes,3,opt,name=timeout,proto3" json:"timeout,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AwaitEventsRequest) Reset() {
	*x = AwaitEventsRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[40]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AwaitEventsRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AwaitEventsRequest) ProtoMessage() {}

func (x *AwaitEventsRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[40]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AwaitEventsRequest.ProtoReflect.Descriptor instead.
func (*AwaitEventsRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{40}
}

func (x *AwaitEventsRequest) GetNspace() string {
	if x != nil {
		return x.Nspace
	}
	return ""
}

func (x *AwaitEventsRequest) GetAfter() uint64 {
	if x != nil {
		return x.After
	}
	return 0
}

func (x *AwaitEventsRequest) GetTimeout() *durationpb.Duration {
	if x != nil {
		return x.Timeout
	}
	return nil
}

// AwaitEventsResponse carries the events after the request's after,
// oldest first; none when the timeout passed first.
type AwaitEventsResponse struct {
	state  protoimpl.MessageState `protogen:"open.v1"`
	Events []*Event               `protobuf:"bytes,1,rep,name=events,proto3" json:"events,omitempty"`
	// missed: events after after are no longer kept.
	Missed        bool `protobuf:"varint,2,opt,name=missed,proto3" json:"missed,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AwaitEventsResponse) Reset() {
	*x = AwaitEventsResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[41]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AwaitEventsResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AwaitEventsResponse) ProtoMessage() {}

func (x *AwaitEventsResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[41]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AwaitEventsResponse.ProtoReflect.Descriptor instead.
func (*AwaitEventsResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{41}
}

func (x *AwaitEventsResponse) GetEvents() []*Event {
	if x != nil {
		return x.Events
	}
	return nil
}

func (x *AwaitEventsResponse) GetMissed() bool {
	if x != nil {
		return x.Missed
	}
	return false
}

// DepartRequest names the departing node's processes of a job.
type DepartRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// procs are the node's processes of the job.
	Procs []*Proc `protobuf:"bytes,1,rep,name=procs,proto3" json:"procs,omitempty"`
	// node is the node's name, for messages.
	Node string `protobuf:"bytes,2,opt,name=node,proto3" json:"node,omitempty"`
	// data is the node's data the callee does not hold yet: empty from a
	// host; a backend that keeps its node's parts and relays to another
	// hands them on in it.
	Data          []byte `protobuf:"bytes,3,opt,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DepartRequest) Reset() {
	*x = DepartRequest{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[42]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DepartRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DepartRequest) ProtoMessage() {}

func (x *DepartRequest) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[42]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DepartRequest.ProtoReflect.Descriptor instead.
func (*DepartRequest) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{42}
}

func (x *DepartRequest) GetProcs() []*Proc {
	if x != nil {
		return x.Procs
	}
	return nil
}

func (x *DepartRequest) GetNode() string {
	if x != nil {
		return x.Node
	}
	return ""
}

func (x *DepartRequest) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

// DepartResponse is empty.
type DepartResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *DepartResponse) Reset() {
	*x = DepartResponse{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[43]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *DepartResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DepartResponse) ProtoMessage() {}

func (x *DepartResponse) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[43]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DepartResponse.ProtoReflect.Descriptor instead.
func (*DepartResponse) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{43}
}

// Event is one kept event.
type Event struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// seq numbers the events in the order the backend got them, from 1.
	Seq uint64 `protobuf:"varint,1,opt,name=seq,proto3" json:"seq,omitempty"`
	// event is the event as NotifyEvent reported it.
	Event         *NotifyEventRequest `protobuf:"bytes,2,opt,name=event,proto3" json:"event,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Event) Reset() {
	*x = Event{}
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[44]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Event) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Event) ProtoMessage() {}

func (x *Event) ProtoReflect() protoreflect.Message {
	mi := &file_gopmi_rm_v1_rm_proto_msgTypes[44]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Event.ProtoReflect.Descriptor instead.
func (*Event) Descriptor() ([]byte, []int) {
	return file_gopmi_rm_v1_rm_proto_rawDescGZIP(), []int{44}
}

func (x *Event) GetSeq() uint64 {
	if x != nil {
		return x.Seq
	}
	return 0
}

func (x *Event) GetEvent() *NotifyEventRequest {
	if x != nil {
		return x.Event
	}
	return nil
}

var File_gopmi_rm_v1_rm_proto protoreflect.FileDescriptor

const file_gopmi_rm_v1_rm_proto_rawDesc = "" +
	"\n" +
	"\x14gopmi/rm/v1/rm.proto\x12\vgopmi.rm.v1\x1a\x1egoogle/protobuf/duration.proto\"2\n" +
	"\x04Proc\x12\x16\n" +
	"\x06nspace\x18\x01 \x01(\tR\x06nspace\x12\x12\n" +
	"\x04rank\x18\x02 \x01(\x05R\x04rank\".\n" +
	"\x04Info\x12\x10\n" +
	"\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n" +
	"\x05value\x18\x02 \x01(\tR\x05value\"\x10\n" +
	"\x0eGetInfoRequest\"\x86\x01\n" +
	"\x0fGetInfoResponse\x12\x12\n" +
	"\x04name\x18\x01 \x01(\tR\x04name\x12\x18\n" +
	"\aversion\x18\x02 \x01(\tR\aversion\x12!\n" +
	"\fapi_versions\x18\x03 \x03(\tR\vapiVersions\x12\"\n" +
	"\fcapabilities\x18\x04 \x03(\tR\fcapabilities\"T\n" +
	"\x04Node\x12\x0e\n" +
	"\x02id\x18\x01 \x01(\x05R\x02id\x12\x12\n" +
	"\x04name\x18\x02 \x01(\tR\x04name\x12\x14\n" +
	"\x05ranks\x18\x03 \x03(\x05R\x05ranks\x12\x12\n" +
	"\x04addr\x18\x04 \x01(\tR\x04addr\"`\n" +
	"\x03App\x12\x1d\n" +
	"\n" +
	"first_rank\x18\x01 \x01(\x05R\tfirstRank\x12\x12\n" +
	"\x04size\x18\x02 \x01(\x05R\x04size\x12\x10\n" +
	"\x03cmd\x18\x03 \x01(\tR\x03cmd\x12\x14\n" +
	"\x05ranks\x18\x04 \x03(\x05R\x05ranks\"\xbd\x01\n" +
	"\x03Job\x12\x16\n" +
	"\x06nspace\x18\x01 \x01(\tR\x06nspace\x12\x12\n" +
	"\x04size\x18\x02 \x01(\x05R\x04size\x12#\n" +
	"\runiverse_size\x18\x03 \x01(\x05R\funiverseSize\x12'\n" +
	"\x05nodes\x18\x04 \x03(\v2\x11.gopmi.rm.v1.NodeR\x05nodes\x12$\n" +
	"\x04apps\x18\x05 \x03(\v2\x10.gopmi.rm.v1.AppR\x04apps\x12\x16\n" +
	"\x06parent\x18\x06 \x01(\tR\x06parent\"\x88\x01\n" +
	"\x10ConfigureRequest\x12\x1f\n" +
	"\vapi_version\x18\x01 \x01(\tR\n" +
	"apiVersion\x12\"\n" +
	"\x03job\x18\x02 \x01(\v2\x10.gopmi.rm.v1.JobR\x03job\x12\x17\n" +
	"\anode_id\x18\x03 \x01(\x05R\x06nodeId\x12\x16\n" +
	"\x06config\x18\x04 \x01(\fR\x06config\"<\n" +
	"\x11ConfigureResponse\x12'\n" +
	"\x05attrs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.InfoR\x05attrs\"h\n" +
	"\x16ClientConnectedRequest\x12'\n" +
	"\x05procs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x12%\n" +
	"\x04info\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"\x19\n" +
	"\x17ClientConnectedResponse\"h\n" +
	"\x16ClientFinalizedRequest\x12'\n" +
	"\x05procs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x12%\n" +
	"\x04info\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"\x19\n" +
	"\x17ClientFinalizedResponse\"\x94\x01\n" +
	"\fAbortRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12\x16\n" +
	"\x06status\x18\x02 \x01(\x05R\x06status\x12\x18\n" +
	"\amessage\x18\x03 \x01(\tR\amessage\x12+\n" +
	"\atargets\x18\x04 \x03(\v2\x11.gopmi.rm.v1.ProcR\atargets\"\x0f\n" +
	"\rAbortResponse\"\x8f\x02\n" +
	"\fFenceRequest\x12\x0e\n" +
	"\x02id\x18\x01 \x01(\tR\x02id\x12'\n" +
	"\x05procs\x18\x02 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x122\n" +
	"\vlocal_procs\x18\x03 \x03(\v2\x11.gopmi.rm.v1.ProcR\n" +
	"localProcs\x12\x12\n" +
	"\x04node\x18\x04 \x01(\tR\x04node\x12\x12\n" +
	"\x04data\x18\x05 \x01(\fR\x04data\x12\x18\n" +
	"\acollect\x18\x06 \x01(\bR\acollect\x123\n" +
	"\atimeout\x18\a \x01(\v2\x19.google.protobuf.DurationR\atimeout\x12\x1b\n" +
	"\thand_over\x18\b \x01(\bR\bhandOver\"#\n" +
	"\rFenceResponse\x12\x12\n" +
	"\x04data\x18\x01 \x01(\fR\x04data\"\xb3\x01\n" +
	"\x12DirectModexRequest\x12/\n" +
	"\trequestor\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\trequestor\x12%\n" +
	"\x04proc\x18\x02 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12\x10\n" +
	"\x03key\x18\x03 \x01(\tR\x03key\x123\n" +
	"\atimeout\x18\x04 \x01(\v2\x19.google.protobuf.DurationR\atimeout\")\n" +
	"\x13DirectModexResponse\x12\x12\n" +
	"\x04data\x18\x01 \x01(\fR\x04data\"\xeb\x01\n" +
	"\x0ePublishRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12%\n" +
	"\x04data\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04data\x12(\n" +
	"\x05range\x18\x03 \x01(\x0e2\x12.gopmi.rm.v1.RangeR\x05range\x12:\n" +
	"\vpersistence\x18\x04 \x01(\x0e2\x18.gopmi.rm.v1.PersistenceR\vpersistence\x12%\n" +
	"\x04info\x18\x05 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"\x11\n" +
	"\x0fPublishResponse\"\xe4\x01\n" +
	"\rLookupRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12\x12\n" +
	"\x04keys\x18\x02 \x03(\tR\x04keys\x12(\n" +
	"\x05range\x18\x03 \x01(\x0e2\x12.gopmi.rm.v1.RangeR\x05range\x12\x12\n" +
	"\x04wait\x18\x04 \x01(\bR\x04wait\x123\n" +
	"\atimeout\x18\x05 \x01(\v2\x19.google.protobuf.DurationR\atimeout\x12%\n" +
	"\x04info\x18\x06 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"d\n" +
	"\tPublished\x12\x10\n" +
	"\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n" +
	"\x05value\x18\x02 \x01(\tR\x05value\x12/\n" +
	"\tpublisher\x18\x03 \x01(\v2\x11.gopmi.rm.v1.ProcR\tpublisher\"<\n" +
	"\x0eLookupResponse\x12*\n" +
	"\x04data\x18\x01 \x03(\v2\x16.gopmi.rm.v1.PublishedR\x04data\"\x9e\x01\n" +
	"\x10UnpublishRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12\x12\n" +
	"\x04keys\x18\x02 \x03(\tR\x04keys\x12(\n" +
	"\x05range\x18\x03 \x01(\x0e2\x12.gopmi.rm.v1.RangeR\x05range\x12%\n" +
	"\x04info\x18\x04 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"\x13\n" +
	"\x11UnpublishResponse\"\x98\x01\n" +
	"\bSpawnApp\x12\x10\n" +
	"\x03cmd\x18\x01 \x01(\tR\x03cmd\x12\x12\n" +
	"\x04argv\x18\x02 \x03(\tR\x04argv\x12\x10\n" +
	"\x03env\x18\x03 \x03(\tR\x03env\x12\x10\n" +
	"\x03cwd\x18\x04 \x01(\tR\x03cwd\x12\x1b\n" +
	"\tmax_procs\x18\x05 \x01(\x05R\bmaxProcs\x12%\n" +
	"\x04info\x18\x06 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\"\xf8\x01\n" +
	"\fSpawnRequest\x12/\n" +
	"\trequestor\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\trequestor\x12,\n" +
	"\bjob_info\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\ajobInfo\x12)\n" +
	"\x04apps\x18\x03 \x03(\v2\x15.gopmi.rm.v1.SpawnAppR\x04apps\x12)\n" +
	"\x06preput\x18\x04 \x03(\v2\x11.gopmi.rm.v1.InfoR\x06preput\x123\n" +
	"\atimeout\x18\x05 \x01(\v2\x19.google.protobuf.DurationR\atimeout\"'\n" +
	"\rSpawnResponse\x12\x16\n" +
	"\x06nspace\x18\x01 \x01(\tR\x06nspace\"\x95\x01\n" +
	"\x0eConnectRequest\x12'\n" +
	"\x05procs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x12%\n" +
	"\x04info\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\x123\n" +
	"\atimeout\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\atimeout\"!\n" +
	"\x0fConnectResponse\x12\x0e\n" +
	"\x02id\x18\x01 \x01(\tR\x02id\"\x98\x01\n" +
	"\x11DisconnectRequest\x12'\n" +
	"\x05procs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x12%\n" +
	"\x04info\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\x123\n" +
	"\atimeout\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\atimeout\"\x14\n" +
	"\x12DisconnectResponse\"N\n" +
	"\x05Query\x12\x12\n" +
	"\x04keys\x18\x01 \x03(\tR\x04keys\x121\n" +
	"\n" +
	"qualifiers\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\n" +
	"qualifiers\"c\n" +
	"\fQueryRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12,\n" +
	"\aqueries\x18\x02 \x03(\v2\x12.gopmi.rm.v1.QueryR\aqueries\"<\n" +
	"\rQueryResponse\x12+\n" +
	"\aresults\x18\x01 \x03(\v2\x11.gopmi.rm.v1.InfoR\aresults\"\x8d\x01\n" +
	"\n" +
	"LogRequest\x12%\n" +
	"\x04proc\x18\x01 \x01(\v2\x11.gopmi.rm.v1.ProcR\x04proc\x12%\n" +
	"\x04data\x18\x02 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04data\x121\n" +
	"\n" +
	"directives\x18\x03 \x03(\v2\x11.gopmi.rm.v1.InfoR\n" +
	"directives\"\r\n" +
	"\vLogResponse\"\xb8\x01\n" +
	"\x12NotifyEventRequest\x12\x12\n" +
	"\x04code\x18\x01 \x01(\tR\x04code\x12)\n" +
	"\x06source\x18\x02 \x01(\v2\x11.gopmi.rm.v1.ProcR\x06source\x12(\n" +
	"\x05range\x18\x03 \x01(\x0e2\x12.gopmi.rm.v1.RangeR\x05range\x12%\n" +
	"\x04info\x18\x04 \x03(\v2\x11.gopmi.rm.v1.InfoR\x04info\x12\x12\n" +
	"\x04node\x18\x05 \x01(\tR\x04node\"\x15\n" +
	"\x13NotifyEventResponse\"w\n" +
	"\x12AwaitEventsRequest\x12\x16\n" +
	"\x06nspace\x18\x01 \x01(\tR\x06nspace\x12\x14\n" +
	"\x05after\x18\x02 \x01(\x04R\x05after\x123\n" +
	"\atimeout\x18\x03 \x01(\v2\x19.google.protobuf.DurationR\atimeout\"Y\n" +
	"\x13AwaitEventsResponse\x12*\n" +
	"\x06events\x18\x01 \x03(\v2\x12.gopmi.rm.v1.EventR\x06events\x12\x16\n" +
	"\x06missed\x18\x02 \x01(\bR\x06missed\"`\n" +
	"\rDepartRequest\x12'\n" +
	"\x05procs\x18\x01 \x03(\v2\x11.gopmi.rm.v1.ProcR\x05procs\x12\x12\n" +
	"\x04node\x18\x02 \x01(\tR\x04node\x12\x12\n" +
	"\x04data\x18\x03 \x01(\fR\x04data\"\x10\n" +
	"\x0eDepartResponse\"P\n" +
	"\x05Event\x12\x10\n" +
	"\x03seq\x18\x01 \x01(\x04R\x03seq\x125\n" +
	"\x05event\x18\x02 \x01(\v2\x1f.gopmi.rm.v1.NotifyEventRequestR\x05event*i\n" +
	"\x05Range\x12\x15\n" +
	"\x11RANGE_UNSPECIFIED\x10\x00\x12\x0f\n" +
	"\vRANGE_LOCAL\x10\x01\x12\x13\n" +
	"\x0fRANGE_NAMESPACE\x10\x02\x12\x11\n" +
	"\rRANGE_SESSION\x10\x03\x12\x10\n" +
	"\fRANGE_GLOBAL\x10\x04*\xa6\x01\n" +
	"\vPersistence\x12\x1b\n" +
	"\x17PERSISTENCE_UNSPECIFIED\x10\x00\x12\x1a\n" +
	"\x16PERSISTENCE_INDEFINITE\x10\x01\x12\x1a\n" +
	"\x16PERSISTENCE_FIRST_READ\x10\x02\x12\x14\n" +
	"\x10PERSISTENCE_PROC\x10\x03\x12\x13\n" +
	"\x0fPERSISTENCE_APP\x10\x04\x12\x17\n" +
	"\x13PERSISTENCE_SESSION\x10\x052\xc3\n" +
	"\n" +
	"\x16ResourceManagerService\x12D\n" +
	"\aGetInfo\x12\x1b.gopmi.rm.v1.GetInfoRequest\x1a\x1c.gopmi.rm.v1.GetInfoResponse\x12J\n" +
	"\tConfigure\x12\x1d.gopmi.rm.v1.ConfigureRequest\x1a\x1e.gopmi.rm.v1.ConfigureResponse\x12\\\n" +
	"\x0fClientConnected\x12#.gopmi.rm.v1.ClientConnectedRequest\x1a$.gopmi.rm.v1.ClientConnectedResponse\x12\\\n" +
	"\x0fClientFinalized\x12#.gopmi.rm.v1.ClientFinalizedRequest\x1a$.gopmi.rm.v1.ClientFinalizedResponse\x12>\n" +
	"\x05Abort\x12\x19.gopmi.rm.v1.AbortRequest\x1a\x1a.gopmi.rm.v1.AbortResponse\x12>\n" +
	"\x05Fence\x12\x19.gopmi.rm.v1.FenceRequest\x1a\x1a.gopmi.rm.v1.FenceResponse\x12P\n" +
	"\vDirectModex\x12\x1f.gopmi.rm.v1.DirectModexRequest\x1a .gopmi.rm.v1.DirectModexResponse\x12D\n" +
	"\aPublish\x12\x1b.gopmi.rm.v1.PublishRequest\x1a\x1c.gopmi.rm.v1.PublishResponse\x12A\n" +
	"\x06Lookup\x12\x1a.gopmi.rm.v1.LookupRequest\x1a\x1b.gopmi.rm.v1.LookupResponse\x12J\n" +
	"\tUnpublish\x12\x1d.gopmi.rm.v1.UnpublishRequest\x1a\x1e.gopmi.rm.v1.UnpublishResponse\x12>\n" +
	"\x05Spawn\x12\x19.gopmi.rm.v1.SpawnRequest\x1a\x1a.gopmi.rm.v1.SpawnResponse\x12D\n" +
	"\aConnect\x12\x1b.gopmi.rm.v1.ConnectRequest\x1a\x1c.gopmi.rm.v1.ConnectResponse\x12M\n" +
	"\n" +
	"Disconnect\x12\x1e.gopmi.rm.v1.DisconnectRequest\x1a\x1f.gopmi.rm.v1.DisconnectResponse\x12>\n" +
	"\x05Query\x12\x19.gopmi.rm.v1.QueryRequest\x1a\x1a.gopmi.rm.v1.QueryResponse\x128\n" +
	"\x03Log\x12\x17.gopmi.rm.v1.LogRequest\x1a\x18.gopmi.rm.v1.LogResponse\x12P\n" +
	"\vNotifyEvent\x12\x1f.gopmi.rm.v1.NotifyEventRequest\x1a .gopmi.rm.v1.NotifyEventResponse\x12P\n" +
	"\vAwaitEvents\x12\x1f.gopmi.rm.v1.AwaitEventsRequest\x1a .gopmi.rm.v1.AwaitEventsResponse\x12A\n" +
	"\x06Depart\x12\x1a.gopmi.rm.v1.DepartRequest\x1a\x1b.gopmi.rm.v1.DepartResponseB/Z-github.com/gopmi/gopmi/proto/gopmi/rm/v1;rmv1b\x06proto3"

var (
	file_gopmi_rm_v1_rm_proto_rawDescOnce sync.Once
	file_gopmi_rm_v1_rm_proto_rawDescData []byte
)

func file_gopmi_rm_v1_rm_proto_rawDescGZIP() []byte {
	file_gopmi_rm_v1_rm_proto_rawDescOnce.Do(func() {
		file_gopmi_rm_v1_rm_proto_rawDescData = protoimpl.X.CompressGZIP(unsafe.Slice(unsafe.StringData(file_gopmi_rm_v1_rm_proto_rawDesc), len(file_gopmi_rm_v1_rm_proto_rawDesc)))
	})
	return file_gopmi_rm_v1_rm_proto_rawDescData
}

var file_gopmi_rm_v1_rm_proto_enumTypes = make([]protoimpl.EnumInfo, 2)
var file_gopmi_rm_v1_rm_proto_msgTypes = make([]protoimpl.MessageInfo, 45)
var file_gopmi_rm_v1_rm_proto_goTypes = []any{
	(Range)(0),                      // 0: gopmi.rm.v1.Range
	(Persistence)(0),                // 1: gopmi.rm.v1.Persistence
	(*Proc)(nil),                    // 2: gopmi.rm.v1.Proc
	(*Info)(nil),                    // 3: gopmi.rm.v1.Info
	(*GetInfoRequest)(nil),          // 4: gopmi.rm.v1.GetInfoRequest
	(*GetInfoResponse)(nil),         // 5: gopmi.rm.v1.GetInfoResponse
	(*Node)(nil),                    // 6: gopmi.rm.v1.Node
	(*App)(nil),                     // 7: gopmi.rm.v1.App
	(*Job)(nil),                     // 8: gopmi.rm.v1.Job
	(*ConfigureRequest)(nil),        // 9: gopmi.rm.v1.ConfigureRequest
	(*ConfigureResponse)(nil),       // 10: gopmi.rm.v1.ConfigureResponse
	(*ClientConnectedRequest)(nil),  // 11: gopmi.rm.v1.ClientConnectedRequest
	(*ClientConnectedResponse)(nil), // 12: gopmi.rm.v1.ClientConnectedResponse
	(*ClientFinalizedRequest)(nil),  // 13: gopmi.rm.v1.ClientFinalizedRequest
	(*ClientFinalizedResponse)(nil), // 14: gopmi.rm.v1.ClientFinalizedResponse
	(*AbortRequest)(nil),            // 15: gopmi.rm.v1.AbortRequest
	(*AbortResponse)(nil),           // 16: gopmi.rm.v1.AbortResponse
	(*FenceRequest)(nil),            // 17: gopmi.rm.v1.FenceRequest
	(*FenceResponse)(nil),           // 18: gopmi.rm.v1.FenceResponse
	(*DirectModexRequest)(nil),      // 19: gopmi.rm.v1.DirectModexRequest
	(*DirectModexResponse)(nil),     // 20: gopmi.rm.v1.DirectModexResponse
	(*PublishRequest)(nil),          // 21: gopmi.rm.v1.PublishRequest
	(*PublishResponse)(nil),         // 22: gopmi.rm.v1.PublishResponse
	(*LookupRequest)(nil),           // 23: gopmi.rm.v1.LookupRequest
	(*Published)(nil),               // 24: gopmi.rm.v1.Published
	(*LookupResponse)(nil),          // 25: gopmi.rm.v1.LookupResponse
	(*UnpublishRequest)(nil),        // 26: gopmi.rm.v1.UnpublishRequest
	(*UnpublishResponse)(nil),       // 27: gopmi.rm.v1.UnpublishResponse
	(*SpawnApp)(nil),                // 28: gopmi.rm.v1.SpawnApp
	(*SpawnRequest)(nil),            // 29: gopmi.rm.v1.SpawnRequest
	(*SpawnResponse)(nil),           // 30: gopmi.rm.v1.SpawnResponse
	(*ConnectRequest)(nil),          // 31: gopmi.rm.v1.ConnectRequest
	(*ConnectResponse)(nil),         // 32: gopmi.rm.v1.ConnectResponse
	(*DisconnectRequest)(nil),       // 33: gopmi.rm.v1.DisconnectRequest
	(*DisconnectResponse)(nil),      // 34: gopmi.rm.v1.DisconnectResponse
	(*Query)(nil),                   // 35: gopmi.rm.v1.Query
	(*QueryRequest)(nil),            // 36: gopmi.rm.v1.QueryRequest
	(*QueryResponse)(nil),           // 37: gopmi.rm.v1.QueryResponse
	(*LogRequest)(nil),              // 38: gopmi.rm.v1.LogRequest
	(*LogResponse)(nil),             // 39: gopmi.rm.v1.LogResponse
	(*NotifyEventRequest)(nil),      // 40: gopmi.rm.v1.NotifyEventRequest
	(*NotifyEventResponse)(nil),     // 41: gopmi.rm.v1.NotifyEventResponse
	(*AwaitEventsRequest)(nil),      // 42: gopmi.rm.v1.AwaitEventsRequest
	(*AwaitEventsResponse)(nil),     // 43: gopmi.rm.v1.AwaitEventsResponse
	(*DepartRequest)(nil),           // 44: gopmi.rm.v1.DepartRequest
	(*DepartResponse)(nil),          // 45: gopmi.rm.v1.DepartResponse
	(*Event)(nil),                   // 46: gopmi.rm.v1.Event
	(*durationpb.Duration)(nil),     // 47: google.protobuf.Duration
}
var file_gopmi_rm_v1_rm_proto_depIdxs = []int32{
	6,  // 0: gopmi.rm.v1.Job.nodes:type_name -> gopmi.rm.v1.Node
	7,  // 1: gopmi.rm.v1.Job.apps:type_name -> gopmi.rm.v1.App
	8,  // 2: gopmi.rm.v1.ConfigureRequest.job:type_name -> gopmi.rm.v1.Job
	3,  // 3: gopmi.rm.v1.ConfigureResponse.attrs:type_name -> gopmi.rm.v1.Info
	2,  // 4: gopmi.rm.v1.ClientConnectedRequest.procs:type_name -> gopmi.rm.v1.Proc
	3,  // 5: gopmi.rm.v1.ClientConnectedRequest.info:type_name -> gopmi.rm.v1.Info
	2,  // 6: gopmi.rm.v1.ClientFinalizedRequest.procs:type_name -> gopmi.rm.v1.Proc
	3,  // 7: gopmi.rm.v1.ClientFinalizedRequest.info:type_name -> gopmi.rm.v1.Info
	2,  // 8: gopmi.rm.v1.AbortRequest.proc:type_name -> gopmi.rm.v1.Proc
	2,  // 9: gopmi.rm.v1.AbortRequest.targets:type_name -> gopmi.rm.v1.Proc
	2,  // 10: gopmi.rm.v1.FenceRequest.procs:type_name -> gopmi.rm.v1.Proc
	2,  // 11: gopmi.rm.v1.FenceRequest.local_procs:type_name -> gopmi.rm.v1.Proc
	47, // 12: gopmi.rm.v1.FenceRequest.timeout:type_name -> google.protobuf.Duration
	2,  // 13: gopmi.rm.v1.DirectModexRequest.requestor:type_name -> gopmi.rm.v1.Proc
	2,  // 14: gopmi.rm.v1.DirectModexRequest.proc:type_name -> gopmi.rm.v1.Proc
	47, // 15: gopmi.rm.v1.DirectModexRequest.timeout:type_name -> google.protobuf.Duration
	2,  // 16: gopmi.rm.v1.PublishRequest.proc:type_name -> gopmi.rm.v1.Proc
	3,  // 17: gopmi.rm.v1.PublishRequest.data:type_name -> gopmi.rm.v1.Info
	0,  // 18: gopmi.rm.v1.PublishRequest.range:type_name -> gopmi.rm.v1.Range
	1,  // 19: gopmi.rm.v1.PublishRequest.persistence:type_name -> gopmi.rm.v1.Persistence
	3,  // 20: gopmi.rm.v1.PublishRequest.info:type_name -> gopmi.rm.v1.Info
	2,  // 21: gopmi.rm.v1.LookupRequest.proc:type_name -> gopmi.rm.v1.Proc
	0,  // 22: gopmi.rm.v1.LookupRequest.range:type_name -> gopmi.rm.v1.Range
	47, // 23: gopmi.rm.v1.LookupRequest.timeout:type_name -> google.protobuf.Duration
	3,  // 24: gopmi.rm.v1.LookupRequest.info:type_name -> gopmi.rm.v1.Info
	2,  // 25: gopmi.rm.v1.Published.publisher:type_name -> gopmi.rm.v1.Proc
	24, // 26: gopmi.rm.v1.LookupResponse.data:type_name -> gopmi.rm.v1.Published
	2,  // 27: gopmi.rm.v1.UnpublishRequest.proc:type_name -> gopmi.rm.v1.Proc
	0,  // 28: gopmi.rm.v1.UnpublishRequest.range:type_name -> gopmi.rm.v1.Range
	3,  // 29: gopmi.rm.v1.UnpublishRequest.info:type_name -> gopmi.rm.v1.Info
	3,  // 30: gopmi.rm.v1.SpawnApp.info:type_name -> gopmi.rm.v1.Info
	2,  // 31: gopmi.rm.v1.SpawnRequest.requestor:type_name -> gopmi.rm.v1.Proc
	3,  // 32: gopmi.rm.v1.SpawnRequest.job_info:type_name -> gopmi.rm.v1.Info
	28, // 33: gopmi.rm.v1.SpawnRequest.apps:type_name -> gopmi.rm.v1.SpawnApp
	3,  // 34: gopmi.rm.v1.SpawnRequest.preput:type_name -> gopmi.rm.v1.Info
	47, // 35: gopmi.rm.v1.SpawnRequest.timeout:type_name -> google.protobuf.Duration
	2,  // 36: gopmi.rm.v1.ConnectRequest.procs:type_name -> gopmi.rm.v1.Proc
	3,  // 37: gopmi.rm.v1.ConnectRequest.info:type_name -> gopmi.rm.v1.Info
	47, // 38: gopmi.rm.v1.ConnectRequest.timeout:type_name -> google.protobuf.Duration
	2,  // 39: gopmi.rm.v1.DisconnectRequest.procs:type_name -> gopmi.rm.v1.Proc
	3,  // 40: gopmi.rm.v1.DisconnectRequest.info:type_name -> gopmi.rm.v1.Info
	47, // 41: gopmi.rm.v1.DisconnectRequest.timeout:type_name -> google.protobuf.Duration
	3,  // 42: gopmi.rm.v1.Query.qualifiers:type_name -> gopmi.rm.v1.Info
	2,  // 43: gopmi.rm.v1.QueryRequest.proc:type_name -> gopmi.rm.v1.Proc
	35, // 44: gopmi.rm.v1.QueryRequest.queries:type_name -> gopmi.rm.v1.Query
	3,  // 45: gopmi.rm.v1.QueryResponse.results:type_name -> gopmi.rm.v1.Info
	2,  // 46: gopmi.rm.v1.LogRequest.proc:type_name -> gopmi.rm.v1.Proc
	3,  // 47: gopmi.rm.v1.LogRequest.data:type_name -> gopmi.rm.v1.Info
	3,  // 48: gopmi.rm.v1.LogRequest.directives:type_name -> gopmi.rm.v1.Info
	2,  // 49: gopmi.rm.v1.NotifyEventRequest.source:type_name -> gopmi.rm.v1.Proc
	0,  // 50: gopmi.rm.v1.NotifyEventRequest.range:type_name -> gopmi.rm.v1.Range
	3,  // 51: gopmi.rm.v1.NotifyEventRequest.info:type_name -> gopmi.rm.v1.Info
	47, // 52: gopmi.rm.v1.AwaitEventsRequest.timeout:type_name -> google.protobuf.Duration
	46, // 53: gopmi.rm.v1.AwaitEventsResponse.events:type_name -> gopmi.rm.v1.Event
	2,  // 54: gopmi.rm.v1.DepartRequest.procs:type_name -> gopmi.rm.v1.Proc
	40, // 55: gopmi.rm.v1.Event.event:type_name -> gopmi.rm.v1.NotifyEventRequest
	4,  // 56: gopmi.rm.v1.ResourceManagerService.GetInfo:input_type -> gopmi.rm.v1.GetInfoRequest
	9,  // 57: gopmi.rm.v1.ResourceManagerService.Configure:input_type -> gopmi.rm.v1.ConfigureRequest
	11, // 58: gopmi.rm.v1.ResourceManagerService.ClientConnected:input_type -> gopmi.rm.v1.ClientConnectedRequest
	13, // 59: gopmi.rm.v1.ResourceManagerService.ClientFinalized:input_type -> gopmi.rm.v1.ClientFinalizedRequest
	15, // 60: gopmi.rm.v1.ResourceManagerService.Abort:input_type -> gopmi.rm.v1.AbortRequest
	17, // 61: gopmi.rm.v1.ResourceManagerService.Fence:input_type -> gopmi.rm.v1.FenceRequest
	19, // 62: gopmi.rm.v1.ResourceManagerService.DirectModex:input_type -> gopmi.rm.v1.DirectModexRequest
	21, // 63: gopmi.rm.v1.ResourceManagerService.Publish:input_type -> gopmi.rm.v1.PublishRequest
	23, // 64: gopmi.rm.v1.ResourceManagerService.Lookup:input_type -> gopmi.rm.v1.LookupRequest
	26, // 65: gopmi.rm.v1.ResourceManagerService.Unpublish:input_type -> gopmi.rm.v1.UnpublishRequest
	29, // 66: gopmi.rm.v1.ResourceManagerService.Spawn:input_type -> gopmi.rm.v1.SpawnRequest
	31, // 67: gopmi.rm.v1.ResourceManagerService.Connect:input_type -> gopmi.rm.v1.ConnectRequest
	33, // 68: gopmi.rm.v1.ResourceManagerService.Disconnect:input_type -> gopmi.rm.v1.DisconnectRequest
	36, // 69: gopmi.rm.v1.ResourceManagerService.Query:input_type -> gopmi.rm.v1.QueryRequest
	38, // 70: gopmi.rm.v1.ResourceManagerService.Log:input_type -> gopmi.rm.v1.LogRequest
	40, // 71: gopmi.rm.v1.ResourceManagerService.NotifyEvent:input_type -> gopmi.rm.v1.NotifyEventRequest
	42, // 72: gopmi.rm.v1.ResourceManagerService.AwaitEvents:input_type -> gopmi.rm.v1.AwaitEventsRequest
	44, // 73: gopmi.rm.v1.ResourceManagerService.Depart:input_type -> gopmi.rm.v1.DepartRequest
	5,  // 74: gopmi.rm.v1.ResourceManagerService.GetInfo:output_type -> gopmi.rm.v1.GetInfoResponse
	10, // 75: gopmi.rm.v1.ResourceManagerService.Configure:output_type -> gopmi.rm.v1.ConfigureResponse
	12, // 76: gopmi.rm.v1.ResourceManagerService.ClientConnected:output_type -> gopmi.rm.v1.ClientConnectedResponse
	14, // 77: gopmi.rm.v1.ResourceManagerService.ClientFinalized:output_type -> gopmi.rm.v1.ClientFinalizedResponse
	16, // 78: gopmi.rm.v1.ResourceManagerService.Abort:output_type -> gopmi.rm.v1.AbortResponse
	18, // 79: gopmi.rm.v1.ResourceManagerService.Fence:output_type -> gopmi.rm.v1.FenceResponse
	20, // 80: gopmi.rm.v1.ResourceManagerService.DirectModex:output_type -> gopmi.rm.v1.DirectModexResponse
	22, // 81: gopmi.rm.v1.ResourceManagerService.Publish:output_type -> gopmi.rm.v1.PublishResponse
	25, // 82: gopmi.rm.v1.ResourceManagerService.Lookup:output_type -> gopmi.rm.v1.LookupResponse
	27, // 83: gopmi.rm.v1.ResourceManagerService.Unpublish:output_type -> gopmi.rm.v1.UnpublishResponse
	30, // 84: gopmi.rm.v1.ResourceManagerService.Spawn:output_type -> gopmi.rm.v1.SpawnResponse
	32, // 85: gopmi.rm.v1.ResourceManagerService.Connect:output_type -> gopmi.rm.v1.ConnectResponse
	34, // 86: gopmi.rm.v1.ResourceManagerService.Disconnect:output_type -> gopmi.rm.v1.DisconnectResponse
	37, // 87: gopmi.rm.v1.ResourceManagerService.Query:output_type -> gopmi.rm.v1.QueryResponse
	39, // 88: gopmi.rm.v1.ResourceManagerService.Log:output_type -> gopmi.rm.v1.LogResponse
	41, // 89: gopmi.rm.v1.ResourceManagerService.NotifyEvent:output_type -> gopmi.rm.v1.NotifyEventResponse
	43, // 90: gopmi.rm.v1.ResourceManagerService.AwaitEvents:output_type -> gopmi.rm.v1.AwaitEventsResponse
	45, // 91: gopmi.rm.v1.ResourceManagerService.Depart:output_type -> gopmi.rm.v1.DepartResponse
	74, // [74:92] is the sub-list for method output_type
	56, // [56:74] is the sub-list for method input_type
	56, // [56:56] is the sub-list for extension type_name
	56, // [56:56] is the sub-list for extension extendee
	0,  // [0:56] is the sub-list for field type_name
}

func init() { file_gopmi_rm_v1_rm_proto_init() }
func file_gopmi_rm_v1_rm_proto_init() {
	if File_gopmi_rm_v1_rm_proto != nil {
		return
	}
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			RawDescriptor: unsafe.Slice(unsafe.StringData(file_gopmi_rm_v1_rm_proto_rawDesc), len(file_gopmi_rm_v1_rm_proto_rawDesc)),
			NumEnums:      2,
			NumMessages:   45,
			NumExtensions: 0,
			NumServices:   1,
		},
		GoTypes:           file_gopmi_rm_v1_rm_proto_goTypes,
		DependencyIndexes: file_gopmi_rm_v1_rm_proto_depIdxs,
		EnumInfos:         file_gopmi_rm_v1_rm_proto_enumTypes,
		MessageInfos:      file_gopmi_rm_v1_rm_proto_msgTypes,
	}.Build()
	File_gopmi_rm_v1_rm_proto = out.File
	file_gopmi_rm_v1_rm_proto_goTypes = nil
	file_gopmi_rm_v1_rm_proto_depIdxs = nil
}
