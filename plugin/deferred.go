package plugin

import "context"

// Deferred is a Full whose implementation is found when a call comes:
// Resolve returns the backend to forward to, dialling a daemon or waiting
// for a process that is still starting, within the call's context. A
// backend that lives elsewhere can so be handed out before it is reachable.
//
// call names the method in lower-case words ("direct modex"), for the
// errors Resolve returns.
type Deferred struct {
	Resolve func(ctx context.Context, call string) (Full, error)
}

var _ Full = Deferred{}

// GetInfo forwards.
func (d Deferred) GetInfo(ctx context.Context) (*BackendInfo, error) {
	b, err := d.Resolve(ctx, "get info")
	if err != nil {
		return nil, err
	}
	return b.GetInfo(ctx)
}

// Configure forwards.
func (d Deferred) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	b, err := d.Resolve(ctx, "configure")
	if err != nil {
		return nil, err
	}
	return b.Configure(ctx, req)
}

// ClientConnected forwards.
func (d Deferred) ClientConnected(ctx context.Context, req *ClientRequest) error {
	b, err := d.Resolve(ctx, "client connected")
	if err != nil {
		return err
	}
	return b.ClientConnected(ctx, req)
}

// ClientFinalized forwards.
func (d Deferred) ClientFinalized(ctx context.Context, req *ClientRequest) error {
	b, err := d.Resolve(ctx, "client finalized")
	if err != nil {
		return err
	}
	return b.ClientFinalized(ctx, req)
}

// Abort forwards.
func (d Deferred) Abort(ctx context.Context, req *AbortRequest) error {
	b, err := d.Resolve(ctx, "abort")
	if err != nil {
		return err
	}
	return b.Abort(ctx, req)
}

// Fence forwards.
func (d Deferred) Fence(ctx context.Context, req *FenceRequest) (*FenceResponse, error) {
	b, err := d.Resolve(ctx, "fence")
	if err != nil {
		return nil, err
	}
	return b.Fence(ctx, req)
}

// DirectModex forwards.
func (d Deferred) DirectModex(ctx context.Context, req *ModexRequest) (*ModexResponse, error) {
	b, err := d.Resolve(ctx, "direct modex")
	if err != nil {
		return nil, err
	}
	return b.DirectModex(ctx, req)
}

// Publish forwards.
func (d Deferred) Publish(ctx context.Context, req *PublishRequest) error {
	b, err := d.Resolve(ctx, "publish")
	if err != nil {
		return err
	}
	return b.Publish(ctx, req)
}

// Lookup forwards.
func (d Deferred) Lookup(ctx context.Context, req *LookupRequest) (*LookupResponse, error) {
	b, err := d.Resolve(ctx, "lookup")
	if err != nil {
		return nil, err
	}
	return b.Lookup(ctx, req)
}

// Unpublish forwards.
func (d Deferred) Unpublish(ctx context.Context, req *UnpublishRequest) error {
	b, err := d.Resolve(ctx, "unpublish")
	if err != nil {
		return err
	}
	return b.Unpublish(ctx, req)
}

// Spawn forwards.
func (d Deferred) Spawn(ctx context.Context, req *SpawnRequest) (*SpawnResponse, error) {
	b, err := d.Resolve(ctx, "spawn")
	if err != nil {
		return nil, err
	}
	return b.Spawn(ctx, req)
}

// Connect forwards.
func (d Deferred) Connect(ctx context.Context, req *ConnectRequest) (*ConnectResponse, error) {
	b, err := d.Resolve(ctx, "connect")
	if err != nil {
		return nil, err
	}
	return b.Connect(ctx, req)
}

// Disconnect forwards.
func (d Deferred) Disconnect(ctx context.Context, req *DisconnectRequest) error {
	b, err := d.Resolve(ctx, "disconnect")
	if err != nil {
		return err
	}
	return b.Disconnect(ctx, req)
}

// Query forwards.
func (d Deferred) Query(ctx context.Context, req *QueryRequest) (*QueryResponse, error) {
	b, err := d.Resolve(ctx, "query")
	if err != nil {
		return nil, err
	}
	return b.Query(ctx, req)
}

// Log forwards.
func (d Deferred) Log(ctx context.Context, req *LogRequest) error {
	b, err := d.Resolve(ctx, "log")
	if err != nil {
		return err
	}
	return b.Log(ctx, req)
}

// NotifyEvent forwards.
func (d Deferred) NotifyEvent(ctx context.Context, req *EventRequest) error {
	b, err := d.Resolve(ctx, "notify event")
	if err != nil {
		return err
	}
	return b.NotifyEvent(ctx, req)
}
