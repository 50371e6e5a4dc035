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
