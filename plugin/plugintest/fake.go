package plugintest

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/plugin"
)

// Fake is a plugin.Full whose methods call the matching function field. A
// nil field answers an error wrapping plugin.ErrNotSupported, except
// GetInfoF, whose default answers DefaultInfo. Fake records nothing: tests
// capture what they need in their functions.
type Fake struct {
	GetInfoF         func(ctx context.Context) (*plugin.BackendInfo, error)
	ConfigureF       func(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error)
	ClientConnectedF func(ctx context.Context, req *plugin.ClientRequest) error
	ClientFinalizedF func(ctx context.Context, req *plugin.ClientRequest) error
	AbortF           func(ctx context.Context, req *plugin.AbortRequest) error
	FenceF           func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error)
	DirectModexF     func(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error)
	PublishF         func(ctx context.Context, req *plugin.PublishRequest) error
	LookupF          func(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error)
	UnpublishF       func(ctx context.Context, req *plugin.UnpublishRequest) error
	SpawnF           func(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error)
	ConnectF         func(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error)
	DisconnectF      func(ctx context.Context, req *plugin.DisconnectRequest) error
	QueryF           func(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error)
	LogF             func(ctx context.Context, req *plugin.LogRequest) error
	NotifyEventF     func(ctx context.Context, req *plugin.EventRequest) error
}

var _ plugin.Full = (*Fake)(nil)

func notSupported(call string) error {
	return fmt.Errorf("fake %s: %w", call, plugin.ErrNotSupported)
}

// DefaultInfo is what a Fake without GetInfoF answers: name "fake",
// version "0", plugin.APIVersion1, and the capability of every optional
// interface for which at least one of f's fields is set.
func (f *Fake) DefaultInfo() *plugin.BackendInfo {
	info := &plugin.BackendInfo{Name: "fake", Version: "0", APIVersions: []string{plugin.APIVersion1}}
	caps := []struct {
		name string
		set  bool
	}{
		{plugin.CapPublish, f.PublishF != nil || f.LookupF != nil || f.UnpublishF != nil},
		{plugin.CapSpawn, f.SpawnF != nil},
		{plugin.CapConnect, f.ConnectF != nil || f.DisconnectF != nil},
		{plugin.CapQuery, f.QueryF != nil},
		{plugin.CapLog, f.LogF != nil},
		{plugin.CapNotify, f.NotifyEventF != nil},
	}
	for _, c := range caps {
		if c.set {
			info.Capabilities = append(info.Capabilities, c.name)
		}
	}
	return info
}

// GetInfo calls GetInfoF, or answers DefaultInfo.
func (f *Fake) GetInfo(ctx context.Context) (*plugin.BackendInfo, error) {
	if f.GetInfoF == nil {
		return f.DefaultInfo(), nil
	}
	return f.GetInfoF(ctx)
}

// Configure calls ConfigureF.
func (f *Fake) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	if f.ConfigureF == nil {
		return nil, notSupported("configure")
	}
	return f.ConfigureF(ctx, req)
}

// ClientConnected calls ClientConnectedF.
func (f *Fake) ClientConnected(ctx context.Context, req *plugin.ClientRequest) error {
	if f.ClientConnectedF == nil {
		return notSupported("client connected")
	}
	return f.ClientConnectedF(ctx, req)
}

// ClientFinalized calls ClientFinalizedF.
func (f *Fake) ClientFinalized(ctx context.Context, req *plugin.ClientRequest) error {
	if f.ClientFinalizedF == nil {
		return notSupported("client finalized")
	}
	return f.ClientFinalizedF(ctx, req)
}

// Abort calls AbortF.
func (f *Fake) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	if f.AbortF == nil {
		return notSupported("abort")
	}
	return f.AbortF(ctx, req)
}

// Fence calls FenceF.
func (f *Fake) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if f.FenceF == nil {
		return nil, notSupported("fence")
	}
	return f.FenceF(ctx, req)
}

// DirectModex calls DirectModexF.
func (f *Fake) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	if f.DirectModexF == nil {
		return nil, notSupported("direct modex")
	}
	return f.DirectModexF(ctx, req)
}

// Publish calls PublishF.
func (f *Fake) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	if f.PublishF == nil {
		return notSupported("publish")
	}
	return f.PublishF(ctx, req)
}

// Lookup calls LookupF.
func (f *Fake) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	if f.LookupF == nil {
		return nil, notSupported("lookup")
	}
	return f.LookupF(ctx, req)
}

// Unpublish calls UnpublishF.
func (f *Fake) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	if f.UnpublishF == nil {
		return notSupported("unpublish")
	}
	return f.UnpublishF(ctx, req)
}

// Spawn calls SpawnF.
func (f *Fake) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	if f.SpawnF == nil {
		return nil, notSupported("spawn")
	}
	return f.SpawnF(ctx, req)
}

// Connect calls ConnectF.
func (f *Fake) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	if f.ConnectF == nil {
		return nil, notSupported("connect")
	}
	return f.ConnectF(ctx, req)
}

// Disconnect calls DisconnectF.
func (f *Fake) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	if f.DisconnectF == nil {
		return notSupported("disconnect")
	}
	return f.DisconnectF(ctx, req)
}

// Query calls QueryF.
func (f *Fake) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	if f.QueryF == nil {
		return nil, notSupported("query")
	}
	return f.QueryF(ctx, req)
}

// Log calls LogF.
func (f *Fake) Log(ctx context.Context, req *plugin.LogRequest) error {
	if f.LogF == nil {
		return notSupported("log")
	}
	return f.LogF(ctx, req)
}

// NotifyEvent calls NotifyEventF.
func (f *Fake) NotifyEvent(ctx context.Context, req *plugin.EventRequest) error {
	if f.NotifyEventF == nil {
		return notSupported("notify event")
	}
	return f.NotifyEventF(ctx, req)
}
