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
