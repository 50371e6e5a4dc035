package plugintest

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/plugin"
)

func notSupported(call string) error {
	return fmt.Errorf("fake %s: %w", call, plugin.ErrNotSupported)
}

// DefaultInfo is what a Fake without GetInfoF answers: name "fake",
// version "0", plugin.APIVersion1, and the capability of every optional
// interface for which at least one of f's fields is set.
func (f *Fake) DefaultInfo() *plugin.BackendInfo {
	info := &plugin.BackendInfo{Name: "fake", Version: "0", APIVersions: []string{plugin.APIVersion1}}
	for _, c := range f.capabilities() {
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
