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
		ApiVersions:  clone(in.APIVersions),
		Capabilities: clone(in.Capabilities),
	}
}

// FromGetInfoResponse converts a backend's info.
func FromGetInfoResponse(in *rmv1.GetInfoResponse) *plugin.BackendInfo {
	return &plugin.BackendInfo{
		Name:         in.GetName(),
		Version:      in.GetVersion(),
		APIVersions:  clone(in.GetApiVersions()),
		Capabilities: clone(in.GetCapabilities()),
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
	return &rmv1.ConfigureResponse{Attrs: mapSlice(in.Attrs, toInfo)}
}

// FromConfigureResponse converts a Configure response.
func FromConfigureResponse(in *rmv1.ConfigureResponse) *plugin.ConfigureResponse {
	return &plugin.ConfigureResponse{Attrs: mapSlice(in.GetAttrs(), fromInfo)}
}

// ToClientConnectedRequest converts a ClientConnected request.
func ToClientConnectedRequest(in *plugin.ClientRequest) *rmv1.ClientConnectedRequest {
	if in == nil {
		in = &plugin.ClientRequest{}
	}
	return &rmv1.ClientConnectedRequest{Procs: mapSlice(in.Procs, toProc), Info: mapSlice(in.Info, toInfo)}
}

// FromClientConnectedRequest converts a ClientConnected request.
func FromClientConnectedRequest(in *rmv1.ClientConnectedRequest) *plugin.ClientRequest {
	return &plugin.ClientRequest{Procs: mapSlice(in.GetProcs(), fromProc), Info: mapSlice(in.GetInfo(), fromInfo)}
}

// ToClientFinalizedRequest converts a ClientFinalized request.
func ToClientFinalizedRequest(in *plugin.ClientRequest) *rmv1.ClientFinalizedRequest {
	if in == nil {
		in = &plugin.ClientRequest{}
	}
	return &rmv1.ClientFinalizedRequest{Procs: mapSlice(in.Procs, toProc), Info: mapSlice(in.Info, toInfo)}
}

// FromClientFinalizedRequest converts a ClientFinalized request.
func FromClientFinalizedRequest(in *rmv1.ClientFinalizedRequest) *plugin.ClientRequest {
	return &plugin.ClientRequest{Procs: mapSlice(in.GetProcs(), fromProc), Info: mapSlice(in.GetInfo(), fromInfo)}
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
		Targets: mapSlice(in.Targets, toProc),
	}
}

// FromAbortRequest converts an Abort request.
func FromAbortRequest(in *rmv1.AbortRequest) *plugin.AbortRequest {
	return &plugin.AbortRequest{
		Proc:    fromProc(in.GetProc()),
		Status:  in.GetStatus(),
		Message: in.GetMessage(),
		Targets: mapSlice(in.GetTargets(), fromProc),
	}
}

// ToFenceRequest converts a Fence request.
func ToFenceRequest(in *plugin.FenceRequest) *rmv1.FenceRequest {
	if in == nil {
		in = &plugin.FenceRequest{}
	}
	return &rmv1.FenceRequest{
		Id:         in.ID,
		Procs:      mapSlice(in.Procs, toProc),
		LocalProcs: mapSlice(in.LocalProcs, toProc),
		Node:       in.Node,
		Data:       in.Data,
		Collect:    in.Collect,
		Timeout:    toDuration(in.Timeout),
		HandOver:   in.HandOver,
	}
}

// FromFenceRequest converts a Fence request.
func FromFenceRequest(in *rmv1.FenceRequest) *plugin.FenceRequest {
	return &plugin.FenceRequest{
		ID:         in.GetId(),
		Procs:      mapSlice(in.GetProcs(), fromProc),
		LocalProcs: mapSlice(in.GetLocalProcs(), fromProc),
		Node:       in.GetNode(),
		Data:       in.GetData(),
		Collect:    in.GetCollect(),
		Timeout:    fromDuration(in.GetTimeout()),
		HandOver:   in.GetHandOver(),
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
		Timeout:   toDuration(in.Timeout),
	}
}

// FromDirectModexRequest converts a DirectModex request.
func FromDirectModexRequest(in *rmv1.DirectModexRequest) *plugin.ModexRequest {
	return &plugin.ModexRequest{
		Requestor: fromProc(in.GetRequestor()),
		Proc:      fromProc(in.GetProc()),
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
		Data:        mapSlice(in.Data, toInfo),
		Range:       toRange(in.Range),
		Persistence: toPersistence(in.Persistence),
		Info:        mapSlice(in.Info, toInfo),
	}
}

// FromPublishRequest converts a Publish request.
func FromPublishRequest(in *rmv1.PublishRequest) *plugin.PublishRequest {
	return &plugin.PublishRequest{
		Proc:        fromProc(in.GetProc()),
		Data:        mapSlice(in.GetData(), fromInfo),
		Range:       fromRange(in.GetRange()),
		Persistence: fromPersistence(in.GetPersistence()),
		Info:        mapSlice(in.GetInfo(), fromInfo),
	}
}

// ToLookupRequest converts a Lookup request.
func ToLookupRequest(in *plugin.LookupRequest) *rmv1.LookupRequest {
	if in == nil {
		in = &plugin.LookupRequest{}
	}
	return &rmv1.LookupRequest{
		Proc:    toProc(in.Proc),
		Keys:    clone(in.Keys),
		Range:   toRange(in.Range),
		Wait:    in.Wait,
		Timeout: toDuration(in.Timeout),
		Info:    mapSlice(in.Info, toInfo),
	}
}

// FromLookupRequest converts a Lookup request.
func FromLookupRequest(in *rmv1.LookupRequest) *plugin.LookupRequest {
	return &plugin.LookupRequest{
		Proc:    fromProc(in.GetProc()),
		Keys:    clone(in.GetKeys()),
		Range:   fromRange(in.GetRange()),
		Wait:    in.GetWait(),
		Timeout: fromDuration(in.GetTimeout()),
		Info:    mapSlice(in.GetInfo(), fromInfo),
	}
}

// ToLookupResponse converts a Lookup response.
func ToLookupResponse(in *plugin.LookupResponse) *rmv1.LookupResponse {
	if in == nil {
		return &rmv1.LookupResponse{}
	}
	return &rmv1.LookupResponse{Data: mapSlice(in.Data, func(p plugin.Published) *rmv1.Published {
		return &rmv1.Published{Key: p.Key, Value: p.Value, Publisher: toProc(p.Publisher)}
	})}
}

// FromLookupResponse converts a Lookup response.
func FromLookupResponse(in *rmv1.LookupResponse) *plugin.LookupResponse {
	return &plugin.LookupResponse{Data: mapSlice(in.GetData(), func(p *rmv1.Published) plugin.Published {
		return plugin.Published{Key: p.GetKey(), Value: p.GetValue(), Publisher: fromProc(p.GetPublisher())}
	})}
}

// ToUnpublishRequest converts an Unpublish request.
func ToUnpublishRequest(in *plugin.UnpublishRequest) *rmv1.UnpublishRequest {
	if in == nil {
		in = &plugin.UnpublishRequest{}
	}
	return &rmv1.UnpublishRequest{
		Proc:  toProc(in.Proc),
		Keys:  clone(in.Keys),
		Range: toRange(in.Range),
		Info:  mapSlice(in.Info, toInfo),
	}
}

// FromUnpublishRequest converts an Unpublish request.
func FromUnpublishRequest(in *rmv1.UnpublishRequest) *plugin.UnpublishRequest {
	return &plugin.UnpublishRequest{
		Proc:  fromProc(in.GetProc()),
		Keys:  clone(in.GetKeys()),
		Range: fromRange(in.GetRange()),
		Info:  mapSlice(in.GetInfo(), fromInfo),
	}
}

// ToSpawnRequest converts a Spawn request.
func ToSpawnRequest(in *plugin.SpawnRequest) *rmv1.SpawnRequest {
	if in == nil {
		in = &plugin.SpawnRequest{}
	}
	return &rmv1.SpawnRequest{
		Requestor: toProc(in.Requestor),
		JobInfo:   mapSlice(in.JobInfo, toInfo),
		Apps: mapSlice(in.Apps, func(a plugin.SpawnApp) *rmv1.SpawnApp {
			return &rmv1.SpawnApp{
				Cmd:      a.Cmd,
				Argv:     clone(a.Argv),
				Env:      clone(a.Env),
				Cwd:      a.Cwd,
				MaxProcs: a.MaxProcs,
				Info:     mapSlice(a.Info, toInfo),
			}
		}),
		Preput:  mapSlice(in.Preput, toInfo),
		Timeout: toDuration(in.Timeout),
	}
}

// FromSpawnRequest converts a Spawn request.
func FromSpawnRequest(in *rmv1.SpawnRequest) *plugin.SpawnRequest {
	return &plugin.SpawnRequest{
		Requestor: fromProc(in.GetRequestor()),
		JobInfo:   mapSlice(in.GetJobInfo(), fromInfo),
		Apps: mapSlice(in.GetApps(), func(a *rmv1.SpawnApp) plugin.SpawnApp {
			return plugin.SpawnApp{
				Cmd:      a.GetCmd(),
				Argv:     clone(a.GetArgv()),
				Env:      clone(a.GetEnv()),
				Cwd:      a.GetCwd(),
				MaxProcs: a.GetMaxProcs(),
				Info:     mapSlice(a.GetInfo(), fromInfo),
			}
		}),
		Preput:  mapSlice(in.GetPreput(), fromInfo),
		Timeout: fromDuration(in.GetTimeout()),
	}
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
	return &rmv1.ConnectRequest{Procs: mapSlice(in.Procs, toProc), Info: mapSlice(in.Info, toInfo), Timeout: toDuration(in.Timeout)}
}

// FromConnectRequest converts a Connect request.
func FromConnectRequest(in *rmv1.ConnectRequest) *plugin.ConnectRequest {
	return &plugin.ConnectRequest{
		Procs:   mapSlice(in.GetProcs(), fromProc),
		Info:    mapSlice(in.GetInfo(), fromInfo),
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
	return &rmv1.DisconnectRequest{Procs: mapSlice(in.Procs, toProc), Info: mapSlice(in.Info, toInfo), Timeout: toDuration(in.Timeout)}
}

// FromDisconnectRequest converts a Disconnect request.
func FromDisconnectRequest(in *rmv1.DisconnectRequest) *plugin.DisconnectRequest {
	return &plugin.DisconnectRequest{
		Procs:   mapSlice(in.GetProcs(), fromProc),
		Info:    mapSlice(in.GetInfo(), fromInfo),
		Timeout: fromDuration(in.GetTimeout()),
	}
}

// ToQueryRequest converts a Query request.
func ToQueryRequest(in *plugin.QueryRequest) *rmv1.QueryRequest {
	if in == nil {
		in = &plugin.QueryRequest{}
	}
	return &rmv1.QueryRequest{
		Proc: toProc(in.Proc),
		Queries: mapSlice(in.Queries, func(q plugin.Query) *rmv1.Query {
			return &rmv1.Query{Keys: clone(q.Keys), Qualifiers: mapSlice(q.Qualifiers, toInfo)}
		}),
	}
}

// FromQueryRequest converts a Query request.
func FromQueryRequest(in *rmv1.QueryRequest) *plugin.QueryRequest {
	return &plugin.QueryRequest{
		Proc: fromProc(in.GetProc()),
		Queries: mapSlice(in.GetQueries(), func(q *rmv1.Query) plugin.Query {
			return plugin.Query{Keys: clone(q.GetKeys()), Qualifiers: mapSlice(q.GetQualifiers(), fromInfo)}
		}),
	}
}

// ToQueryResponse converts a Query response.
func ToQueryResponse(in *plugin.QueryResponse) *rmv1.QueryResponse {
	if in == nil {
		return &rmv1.QueryResponse{}
	}
	return &rmv1.QueryResponse{Results: mapSlice(in.Results, toInfo)}
}

// FromQueryResponse converts a Query response.
func FromQueryResponse(in *rmv1.QueryResponse) *plugin.QueryResponse {
	return &plugin.QueryResponse{Results: mapSlice(in.GetResults(), fromInfo)}
}

// ToLogRequest converts a Log request.
func ToLogRequest(in *plugin.LogRequest) *rmv1.LogRequest {
	if in == nil {
		in = &plugin.LogRequest{}
	}
	return &rmv1.LogRequest{Proc: toProc(in.Proc), Data: mapSlice(in.Data, toInfo), Directives: mapSlice(in.Directives, toInfo)}
}

// FromLogRequest converts a Log request.
func FromLogRequest(in *rmv1.LogRequest) *plugin.LogRequest {
	return &plugin.LogRequest{
		Proc:       fromProc(in.GetProc()),
		Data:       mapSlice(in.GetData(), fromInfo),
		Directives: mapSlice(in.GetDirectives(), fromInfo),
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
		Info:   mapSlice(in.Info, toInfo),
		Node:   in.Node,
	}
}

// FromNotifyEventRequest converts a NotifyEvent request.
func FromNotifyEventRequest(in *rmv1.NotifyEventRequest) *plugin.EventRequest {
	return &plugin.EventRequest{
		Code:   plugin.EventCode(in.GetCode()),
		Source: fromProc(in.GetSource()),
		Range:  fromRange(in.GetRange()),
		Info:   mapSlice(in.GetInfo(), fromInfo),
		Node:   in.GetNode(),
	}
}

// ToAwaitEventsRequest converts an AwaitEvents request.
func ToAwaitEventsRequest(in *plugin.AwaitEventsRequest) *rmv1.AwaitEventsRequest {
	if in == nil {
		in = &plugin.AwaitEventsRequest{}
	}
	return &rmv1.AwaitEventsRequest{Nspace: in.Nspace, After: in.After, Timeout: toDuration(in.Timeout)}
}

// FromAwaitEventsRequest converts an AwaitEvents request.
func FromAwaitEventsRequest(in *rmv1.AwaitEventsRequest) *plugin.AwaitEventsRequest {
	return &plugin.AwaitEventsRequest{Nspace: in.GetNspace(), After: in.GetAfter(), Timeout: fromDuration(in.GetTimeout())}
}

// ToAwaitEventsResponse converts an AwaitEvents answer.
func ToAwaitEventsResponse(in *plugin.AwaitEventsResponse) *rmv1.AwaitEventsResponse {
	if in == nil {
		in = &plugin.AwaitEventsResponse{}
	}
	return &rmv1.AwaitEventsResponse{
		Events: mapSlice(in.Events, func(e plugin.Event) *rmv1.Event {
			return &rmv1.Event{Seq: e.Seq, Event: ToNotifyEventRequest(&e.EventRequest)}
		}),
		Missed: in.Missed,
	}
}

// FromAwaitEventsResponse converts an AwaitEvents answer.
func FromAwaitEventsResponse(in *rmv1.AwaitEventsResponse) *plugin.AwaitEventsResponse {
	return &plugin.AwaitEventsResponse{
		Events: mapSlice(in.GetEvents(), func(e *rmv1.Event) plugin.Event {
			return plugin.Event{Seq: e.GetSeq(), EventRequest: *FromNotifyEventRequest(e.GetEvent())}
		}),
		Missed: in.GetMissed(),
	}
}

// ToDepartRequest converts a Depart request.
func ToDepartRequest(in *plugin.DepartRequest) *rmv1.DepartRequest {
	if in == nil {
		in = &plugin.DepartRequest{}
	}
	return &rmv1.DepartRequest{Procs: mapSlice(in.Procs, toProc), Node: in.Node, Data: in.Data}
}

// FromDepartRequest converts a Depart request.
func FromDepartRequest(in *rmv1.DepartRequest) *plugin.DepartRequest {
	return &plugin.DepartRequest{Procs: mapSlice(in.GetProcs(), fromProc), Node: in.GetNode(), Data: in.GetData()}
}
