package plugin

import (
	"context"
	"fmt"
)

func unsupported(call string) error {
	return fmt.Errorf("%s: %w", call, ErrNotSupported)
}

// Unimplemented is the base a backend embeds: Configure accepts any
// configuration, ClientConnected and ClientFinalized ignore the notice,
// and every other call (GetInfo excepted, which it lacks) answers
// ErrNotSupported. Calls the backend does not implement, including ones
// added to this contract later, so fail cleanly instead of breaking the
// build.
type Unimplemented struct{}

// Configure accepts any configuration.
func (Unimplemented) Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error) {
	return &ConfigureResponse{}, nil
}

// ClientConnected ignores the notification.
func (Unimplemented) ClientConnected(context.Context, *ClientRequest) error { return nil }

// ClientFinalized ignores the notification.
func (Unimplemented) ClientFinalized(context.Context, *ClientRequest) error { return nil }

// Abort answers ErrNotSupported.
func (Unimplemented) Abort(context.Context, *AbortRequest) error { return unsupported("abort") }

// Fence answers ErrNotSupported.
func (Unimplemented) Fence(context.Context, *FenceRequest) (*FenceResponse, error) {
	return nil, unsupported("fence")
}

// DirectModex answers ErrNotSupported.
func (Unimplemented) DirectModex(context.Context, *ModexRequest) (*ModexResponse, error) {
	return nil, unsupported("direct modex")
}

// Publish answers ErrNotSupported.
func (Unimplemented) Publish(context.Context, *PublishRequest) error { return unsupported("publish") }

// Lookup answers ErrNotSupported.
func (Unimplemented) Lookup(context.Context, *LookupRequest) (*LookupResponse, error) {
	return nil, unsupported("lookup")
}

// Unpublish answers ErrNotSupported.
func (Unimplemented) Unpublish(context.Context, *UnpublishRequest) error {
	return unsupported("unpublish")
}

// Spawn answers ErrNotSupported.
func (Unimplemented) Spawn(context.Context, *SpawnRequest) (*SpawnResponse, error) {
	return nil, unsupported("spawn")
}

// Connect answers ErrNotSupported.
func (Unimplemented) Connect(context.Context, *ConnectRequest) (*ConnectResponse, error) {
	return nil, unsupported("connect")
}

// Disconnect answers ErrNotSupported.
func (Unimplemented) Disconnect(context.Context, *DisconnectRequest) error {
	return unsupported("disconnect")
}

// Query answers ErrNotSupported.
func (Unimplemented) Query(context.Context, *QueryRequest) (*QueryResponse, error) {
	return nil, unsupported("query")
}

// Log answers ErrNotSupported.
func (Unimplemented) Log(context.Context, *LogRequest) error { return unsupported("log") }

// NotifyEvent answers ErrNotSupported.
func (Unimplemented) NotifyEvent(context.Context, *EventRequest) error {
	return unsupported("notify event")
}
