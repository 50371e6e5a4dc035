package serve

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// Configure checks that a backend speaks this API and registers the job
// with it, as every host does before it calls bridge.Backend.Up. info is
// what the backend said in its handshake, nil to ask GetInfo. It returns
// the backend's info and the job attributes its Configure returned.
func Configure(ctx context.Context, be plugin.Full, info *plugin.BackendInfo, c *Config) (*plugin.BackendInfo, []plugin.Info, error) {
	name := c.Backend.BinaryName()
	if info == nil {
		var err error
		if info, err = be.GetInfo(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: get info: %w", ErrBackend, name, err)
		}
	}
	if info == nil {
		return nil, nil, fmt.Errorf("%w: %s: get info: empty answer", ErrBackend, name)
	}
	if !slices.Contains(info.APIVersions, plugin.APIVersion1) {
		return nil, nil, fmt.Errorf("%w: %s speaks API versions [%s], this shim needs %s",
			ErrBackend, name, strings.Join(info.APIVersions, " "), plugin.APIVersion1)
	}
	resp, err := be.Configure(ctx, &plugin.ConfigureRequest{
		APIVersion: plugin.APIVersion1,
		Job:        c.Job,
		NodeID:     c.NodeID,
		Config:     c.Backend.Config,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: configure: %w", ErrBackend, name, err)
	}
	if resp == nil {
		return info, nil, nil
	}
	return info, resp.Attrs, nil
}
