package convert

import (
	"github.com/gopmi/gopmi/plugin"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// Blobs (fence and modex data, configuration) are not copied: they can be
// hundreds of MiB, and protobuf neither keeps nor changes them.

// ToGetInfoResponse converts a backend's info.
func ToGetInfoResponse(in *plugin.BackendInfo) *rmv1.GetInfoResponse {
	if in == nil {
		return &rmv1.GetInfoResponse{}
	}
	return &rmv1.GetInfoResponse{
		Name:         in.Name,
		Version:      in.Version,
		ApiVersions:  copyStrings(in.APIVersions),
		Capabilities: copyStrings(in.Capabilities),
	}
}

// FromGetInfoResponse converts a backend's info.
func FromGetInfoResponse(in *rmv1.GetInfoResponse) *plugin.BackendInfo {
	return &plugin.BackendInfo{
		Name:         in.GetName(),
		Version:      in.GetVersion(),
		APIVersions:  copyStrings(in.GetApiVersions()),
		Capabilities: copyStrings(in.GetCapabilities()),
	}
}

// ToConfigureRequest converts a Configure request.
func ToConfigureRequest(in *plugin.ConfigureRequest) *rmv1.ConfigureRequest {
	if in == nil {
		in = &plugin.ConfigureRequest{}
	}
	return &rmv1.ConfigureRequest{
		ApiVersion: in.APIVersion,
		Job:        toJob(in.Job),
		NodeId:     in.NodeID,
		Config:     in.Config,
	}
}

// FromConfigureRequest converts a Configure request.
func FromConfigureRequest(in *rmv1.ConfigureRequest) *plugin.ConfigureRequest {
	return &plugin.ConfigureRequest{
		APIVersion: in.GetApiVersion(),
		Job:        fromJob(in.GetJob()),
		NodeID:     in.GetNodeId(),
		Config:     in.GetConfig(),
	}
}

// ToConfigureResponse converts a Configure response.
func ToConfigureResponse(in *plugin.ConfigureResponse) *rmv1.ConfigureResponse {
	if in == nil {
		return &rmv1.ConfigureResponse{}
	}
	return &rmv1.ConfigureResponse{Attrs: toInfos(in.Attrs)}
}

// FromConfigureResponse converts a Configure response.
func FromConfigureResponse(in *rmv1.ConfigureResponse) *plugin.ConfigureResponse {
	return &plugin.ConfigureResponse{Attrs: fromInfos(in.GetAttrs())}
}

// ToClientConnectedRequest converts a ClientConnected request.
func ToClientConnectedRequest(in *plugin.ClientRequest) *rmv1.ClientConnectedRequest {
	if in == nil {
		in = &plugin.ClientRequest{}
	}
	return &rmv1.ClientConnectedRequest{Procs: toProcs(in.Procs), Info: toInfos(in.Info)}
}

// FromClientConnectedRequest converts a ClientConnected request.
func FromClientConnectedRequest(in *rmv1.ClientConnectedRequest) *plugin.ClientRequest {
	return &plugin.ClientRequest{Procs: fromProcs(in.GetProcs()), Info: fromInfos(in.GetInfo())}
}

// ToClientFinalizedRequest converts a ClientFinalized request.
func ToClientFinalizedRequest(in *plugin.ClientRequest) *rmv1.ClientFinalizedRequest {
	if in == nil {
		in = &plugin.ClientRequest{}
	}
	return &rmv1.ClientFinalizedRequest{Procs: toProcs(in.Procs), Info: toInfos(in.Info)}
}

// FromClientFinalizedRequest converts a ClientFinalized request.
func FromClientFinalizedRequest(in *rmv1.ClientFinalizedRequest) *plugin.ClientRequest {
	return &plugin.ClientRequest{Procs: fromProcs(in.GetProcs()), Info: fromInfos(in.GetInfo())}
}

// ToAbortRequest converts an Abort request.
func ToAbortRequest(in *plugin.AbortRequest) *rmv1.AbortRequest {
	if in == nil {
		in = &plugin.AbortRequest{}
	}
	return &rmv1.AbortRequest{
		Proc:    toProc(in.Proc),
		Status:  in.Status,
		Message: in.Message,
		Targets: toProcs(in.Targets),
	}
}

// FromAbortRequest converts an Abort request.
func FromAbortRequest(in *rmv1.AbortRequest) *plugin.AbortRequest {
	return &plugin.AbortRequest{
		Proc:    fromProc(in.GetProc()),
		Status:  in.GetStatus(),
		Message: in.GetMessage(),
		Targets: fromProcs(in.GetTargets()),
	}
}

// ToFenceRequest converts a Fence request.
func ToFenceRequest(in *plugin.FenceRequest) *rmv1.FenceRequest {
	if in == nil {
		in = &plugin.FenceRequest{}
	}
	return &rmv1.FenceRequest{
		Id:         in.ID,
		Procs:      toProcs(in.Procs),
		LocalProcs: toProcs(in.LocalProcs),
		Node:       in.Node,
		Data:       in.Data,
		Collect:    in.Collect,
		Timeout:    toDuration(in.Timeout),
	}
}

// FromFenceRequest converts a Fence request.
func FromFenceRequest(in *rmv1.FenceRequest) *plugin.FenceRequest {
	return &plugin.FenceRequest{
		ID:         in.GetId(),
		Procs:      fromProcs(in.GetProcs()),
		LocalProcs: fromProcs(in.GetLocalProcs()),
		Node:       in.GetNode(),
		Data:       in.GetData(),
		Collect:    in.GetCollect(),
		Timeout:    fromDuration(in.GetTimeout()),
	}
}

// ToFenceResponse converts a Fence response.
func ToFenceResponse(in *plugin.FenceResponse) *rmv1.FenceResponse {
	if in == nil {
		return &rmv1.FenceResponse{}
	}
	return &rmv1.FenceResponse{Data: in.Data}
}

// FromFenceResponse converts a Fence response.
func FromFenceResponse(in *rmv1.FenceResponse) *plugin.FenceResponse {
	return &plugin.FenceResponse{Data: in.GetData()}
}

// ToDirectModexRequest converts a DirectModex request.
func ToDirectModexRequest(in *plugin.ModexRequest) *rmv1.DirectModexRequest {
	if in == nil {
		in = &plugin.ModexRequest{}
	}
	return &rmv1.DirectModexRequest{
		Requestor: toProc(in.Requestor),
		Proc:      toProc(in.Proc),
		Key:       in.Key,
		Timeout:   toDuration(in.Timeout),
	}
}

// FromDirectModexRequest converts a DirectModex request.
func FromDirectModexRequest(in *rmv1.DirectModexRequest) *plugin.ModexRequest {
	return &plugin.ModexRequest{
		Requestor: fromProc(in.GetRequestor()),
		Proc:      fromProc(in.GetProc()),
		Key:       in.GetKey(),
		Timeout:   fromDuration(in.GetTimeout()),
	}
}

// ToDirectModexResponse converts a DirectModex response.
func ToDirectModexResponse(in *plugin.ModexResponse) *rmv1.DirectModexResponse {
	if in == nil {
		return &rmv1.DirectModexResponse{}
	}
	return &rmv1.DirectModexResponse{Data: in.Data}
}

// FromDirectModexResponse converts a DirectModex response.
func FromDirectModexResponse(in *rmv1.DirectModexResponse) *plugin.ModexResponse {
	return &plugin.ModexResponse{Data: in.GetData()}
}

// ToPublishRequest converts a Publish request.
func ToPublishRequest(in *plugin.PublishRequest) *rmv1.PublishRequest {
	if in == nil {
		in = &plugin.PublishRequest{}
	}
	return &rmv1.PublishRequest{
		Proc:        toProc(in.Proc),
		Data:        toInfos(in.Data),
		Range:       toRange(in.Range),
		Persistence: toPersistence(in.Persistence),
		Info:        toInfos(in.Info),
	}
}

// FromPublishRequest converts a Publish request.
func FromPublishRequest(in *rmv1.PublishRequest) *plugin.PublishRequest {
	return &plugin.PublishRequest{
		Proc:        fromProc(in.GetProc()),
		Data:        fromInfos(in.GetData()),
		Range:       fromRange(in.GetRange()),
		Persistence: fromPersistence(in.GetPersistence()),
		Info:        fromInfos(in.GetInfo()),
	}
}

// ToLookupRequest converts a Lookup request.
func ToLookupRequest(in *plugin.LookupRequest) *rmv1.LookupRequest {
	if in == nil {
		in = &plugin.LookupRequest{}
	}
	return &rmv1.LookupRequest{
		Proc:    toProc(in.Proc),
		Keys:    copyStrings(in.Keys),
		Range:   toRange(in.Range),
		Wait:    in.Wait,
		Timeout: toDuration(in.Timeout),
		Info:    toInfos(in.Info),
	}
}

// FromLookupRequest converts a Lookup request.
func FromLookupRequest(in *rmv1.LookupRequest) *plugin.LookupRequest {
	return &plugin.LookupRequest{
		Proc:    fromProc(in.GetProc()),
		Keys:    copyStrings(in.GetKeys()),
		Range:   fromRange(in.GetRange()),
		Wait:    in.GetWait(),
		Timeout: fromDuration(in.GetTimeout()),
		Info:    fromInfos(in.GetInfo()),
	}
}

// ToLookupResponse converts a Lookup response.
func ToLookupResponse(in *plugin.LookupResponse) *rmv1.LookupResponse {
	if in == nil || len(in.Data) == 0 {
		return &rmv1.LookupResponse{}
	}
	out := &rmv1.LookupResponse{Data: make([]*rmv1.Published, len(in.Data))}
	for i, p := range in.Data {
		out.Data[i] = &rmv1.Published{Key: p.Key, Value: p.Value, Publisher: toProc(p.Publisher)}
	}
	return out
}

// FromLookupResponse converts a Lookup response.
func FromLookupResponse(in *rmv1.LookupResponse) *plugin.LookupResponse {
	out := &plugin.LookupResponse{}
	if len(in.GetData()) == 0 {
		return out
	}
	out.Data = make([]plugin.Published, len(in.GetData()))
	for i, p := range in.GetData() {
		out.Data[i] = plugin.Published{Key: p.GetKey(), Value: p.GetValue(), Publisher: fromProc(p.GetPublisher())}
	}
	return out
}

// ToUnpublishRequest converts an Unpublish request.
func ToUnpublishRequest(in *plugin.UnpublishRequest) *rmv1.UnpublishRequest {
	if in == nil {
		in = &plugin.UnpublishRequest{}
	}
	return &rmv1.UnpublishRequest{
		Proc:  toProc(in.Proc),
		Keys:  copyStrings(in.Keys),
		Range: toRange(in.Range),
		Info:  toInfos(in.Info),
	}
}

// FromUnpublishRequest converts an Unpublish request.
func FromUnpublishRequest(in *rmv1.UnpublishRequest) *plugin.UnpublishRequest {
	return &plugin.UnpublishRequest{
		Proc:  fromProc(in.GetProc()),
		Keys:  copyStrings(in.GetKeys()),
		Range: fromRange(in.GetRange()),
		Info:  fromInfos(in.GetInfo()),
	}
}

// ToSpawnRequest converts a Spawn request.
func ToSpawnRequest(in *plugin.SpawnRequest) *rmv1.SpawnRequest {
	if in == nil {
		in = &plugin.SpawnRequest{}
	}
	out := &rmv1.SpawnRequest{
		Requestor: toProc(in.Requestor),
		JobInfo:   toInfos(in.JobInfo),
		Preput:    toInfos(in.Preput),
		Timeout:   toDuration(in.Timeout),
	}
	for _, a := range in.Apps {
		out.Apps = append(out.Apps, &rmv1.SpawnApp{
			Cmd:      a.Cmd,
			Argv:     copyStrings(a.Argv),
			Env:      copyStrings(a.Env),
			Cwd:      a.Cwd,
			MaxProcs: a.MaxProcs,
			Info:     toInfos(a.Info),
		})
	}
	return out
}

// FromSpawnRequest converts a Spawn request.
func FromSpawnRequest(in *rmv1.SpawnRequest) *plugin.SpawnRequest {
	out := &plugin.SpawnRequest{
		Requestor: fromProc(in.GetRequestor()),
		JobInfo:   fromInfos(in.GetJobInfo()),
		Preput:    fromInfos(in.GetPreput()),
		Timeout:   fromDuration(in.GetTimeout()),
	}
	for _, a := range in.GetApps() {
		out.Apps = append(out.Apps, plugin.SpawnApp{
			Cmd:      a.GetCmd(),
			Argv:     copyStrings(a.GetArgv()),
			Env:      copyStrings(a.GetEnv()),
			Cwd:      a.GetCwd(),
			MaxProcs: a.GetMaxProcs(),
			Info:     fromInfos(a.GetInfo()),
		})
	}
	return out
}

// ToSpawnResponse converts a Spawn response.
func ToSpawnResponse(in *plugin.SpawnResponse) *rmv1.SpawnResponse {
	if in == nil {
		return &rmv1.SpawnResponse{}
	}
	return &rmv1.SpawnResponse{Nspace: in.Nspace}
}

// FromSpawnResponse converts a Spawn response.
func FromSpawnResponse(in *rmv1.SpawnResponse) *plugin.SpawnResponse {
	return &plugin.SpawnResponse{Nspace: in.GetNspace()}
}

// ToConnectRequest converts a Connect request.
func ToConnectRequest(in *plugin.ConnectRequest) *rmv1.ConnectRequest {
	if in == nil {
		in = &plugin.ConnectRequest{}
	}
	return &rmv1.ConnectRequest{Procs: toProcs(in.Procs), Info: toInfos(in.Info), Timeout: toDuration(in.Timeout)}
}

// FromConnectRequest converts a Connect request.
func FromConnectRequest(in *rmv1.ConnectRequest) *plugin.ConnectRequest {
	return &plugin.ConnectRequest{
		Procs:   fromProcs(in.GetProcs()),
		Info:    fromInfos(in.GetInfo()),
		Timeout: fromDuration(in.GetTimeout()),
	}
}

// ToConnectResponse converts a Connect response.
func ToConnectResponse(in *plugin.ConnectResponse) *rmv1.ConnectResponse {
	if in == nil {
		return &rmv1.ConnectResponse{}
	}
	return &rmv1.ConnectResponse{Id: in.ID}
}

// FromConnectResponse converts a Connect response.
func FromConnectResponse(in *rmv1.ConnectResponse) *plugin.ConnectResponse {
	return &plugin.ConnectResponse{ID: in.GetId()}
}

// ToDisconnectRequest converts a Disconnect request.
func ToDisconnectRequest(in *plugin.DisconnectRequest) *rmv1.DisconnectRequest {
	if in == nil {
		in = &plugin.DisconnectRequest{}
	}
	return &rmv1.DisconnectRequest{Procs: toProcs(in.Procs), Info: toInfos(in.Info), Timeout: toDuration(in.Timeout)}
}

// FromDisconnectRequest converts a Disconnect request.
func FromDisconnectRequest(in *rmv1.DisconnectRequest) *plugin.DisconnectRequest {
	return &plugin.DisconnectRequest{
		Procs:   fromProcs(in.GetProcs()),
		Info:    fromInfos(in.GetInfo()),
		Timeout: fromDuration(in.GetTimeout()),
	}
}

// ToQueryRequest converts a Query request.
func ToQueryRequest(in *plugin.QueryRequest) *rmv1.QueryRequest {
	if in == nil {
		in = &plugin.QueryRequest{}
	}
	out := &rmv1.QueryRequest{Proc: toProc(in.Proc)}
	for _, q := range in.Queries {
		out.Queries = append(out.Queries, &rmv1.Query{Keys: copyStrings(q.Keys), Qualifiers: toInfos(q.Qualifiers)})
	}
	return out
}

// FromQueryRequest converts a Query request.
func FromQueryRequest(in *rmv1.QueryRequest) *plugin.QueryRequest {
	out := &plugin.QueryRequest{Proc: fromProc(in.GetProc())}
	for _, q := range in.GetQueries() {
		out.Queries = append(out.Queries, plugin.Query{Keys: copyStrings(q.GetKeys()), Qualifiers: fromInfos(q.GetQualifiers())})
	}
	return out
}

// ToQueryResponse converts a Query response.
func ToQueryResponse(in *plugin.QueryResponse) *rmv1.QueryResponse {
	if in == nil {
		return &rmv1.QueryResponse{}
	}
	return &rmv1.QueryResponse{Results: toInfos(in.Results)}
}

// FromQueryResponse converts a Query response.
func FromQueryResponse(in *rmv1.QueryResponse) *plugin.QueryResponse {
	return &plugin.QueryResponse{Results: fromInfos(in.GetResults())}
}

// ToLogRequest converts a Log request.
func ToLogRequest(in *plugin.LogRequest) *rmv1.LogRequest {
	if in == nil {
		in = &plugin.LogRequest{}
	}
	return &rmv1.LogRequest{Proc: toProc(in.Proc), Data: toInfos(in.Data), Directives: toInfos(in.Directives)}
}

// FromLogRequest converts a Log request.
func FromLogRequest(in *rmv1.LogRequest) *plugin.LogRequest {
	return &plugin.LogRequest{
		Proc:       fromProc(in.GetProc()),
		Data:       fromInfos(in.GetData()),
		Directives: fromInfos(in.GetDirectives()),
	}
}

// ToNotifyEventRequest converts a NotifyEvent request.
func ToNotifyEventRequest(in *plugin.EventRequest) *rmv1.NotifyEventRequest {
	if in == nil {
		in = &plugin.EventRequest{}
	}
	return &rmv1.NotifyEventRequest{
		Code:   string(in.Code),
		Source: toProc(in.Source),
		Range:  toRange(in.Range),
		Info:   toInfos(in.Info),
	}
}

// FromNotifyEventRequest converts a NotifyEvent request.
func FromNotifyEventRequest(in *rmv1.NotifyEventRequest) *plugin.EventRequest {
	return &plugin.EventRequest{
		Code:   plugin.EventCode(in.GetCode()),
		Source: fromProc(in.GetSource()),
		Range:  fromRange(in.GetRange()),
		Info:   fromInfos(in.GetInfo()),
	}
}
