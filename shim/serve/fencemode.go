package serve

import (
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/bridge"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// fenceModes is every fence mode: its bootstrap value and the bridge's.
// A mode's name for users (gopmi run -fence-mode) is its bootstrap value's
// name, lower case, without the FENCE_MODE_ prefix; the first is the
// default.
var fenceModes = []struct {
	wire shimv1.FenceMode
	mode bridge.FenceMode
}{
	{shimv1.FenceMode_FENCE_MODE_COLLECT, bridge.FenceCollect},
	{shimv1.FenceMode_FENCE_MODE_LAZY, bridge.FenceLazy},
	{shimv1.FenceMode_FENCE_MODE_MODEX, bridge.FenceModex},
}

// DefaultFenceMode is the name of the fence mode a bootstrap gets when it
// names none.
var DefaultFenceMode = fenceModeName(fenceModes[0].wire)

func fenceModeName(m shimv1.FenceMode) string {
	return strings.ToLower(strings.TrimPrefix(m.String(), "FENCE_MODE_"))
}

// FenceModeNames lists the fence modes' names for a message: "collect,
// lazy or modex".
func FenceModeNames() string {
	var b strings.Builder
	for i, f := range fenceModes {
		switch {
		case i == len(fenceModes)-1 && i > 0:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(fenceModeName(f.wire))
	}
	return b.String()
}

// ParseFenceMode reads a fence mode's name as a user gives it ("" is the
// default) into the bootstrap's value.
func ParseFenceMode(name string) (shimv1.FenceMode, error) {
	if name == "" {
		return fenceModes[0].wire, nil
	}
	for _, f := range fenceModes {
		if fenceModeName(f.wire) == name {
			return f.wire, nil
		}
	}
	return 0, fmt.Errorf("%q is not a fence mode; want %s", name, FenceModeNames())
}

// bridgeFenceMode is the bridge's mode for a bootstrap's value;
// unspecified is the default.
func bridgeFenceMode(m shimv1.FenceMode) (bridge.FenceMode, error) {
	if m == shimv1.FenceMode_FENCE_MODE_UNSPECIFIED {
		return fenceModes[0].mode, nil
	}
	for _, f := range fenceModes {
		if f.wire == m {
			return f.mode, nil
		}
	}
	return 0, fieldErr("fence_mode", "unknown value %d", int32(m))
}
