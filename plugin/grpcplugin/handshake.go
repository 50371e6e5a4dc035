package grpcplugin

import (
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// Handshake is the go-plugin handshake the host and every backend plugin
// share. The magic cookie only keeps people from running a plugin binary by
// hand; ProtocolVersion is the major version of the gopmi.rm.v1 service, the
// only compatibility gate go-plugin has. Finer negotiation happens in band:
// GetInfo lists API versions and capabilities, Configure carries the chosen
// version.
//
// Protocol version history:
//
//	1: gopmi.rm.v1 ResourceManagerService over gRPC (the first release).
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "GOPMI_PLUGIN",
	MagicCookieValue: "e4fe59169c8619f5e8dab8e9ce7f0a43649f63e04f8904bdd91a7676580a5e22",
}

// PluginName is the backend's name in go-plugin's plugin set.
const PluginName = "backend"

// DefaultMaxMessageSize bounds one gRPC message in either direction unless
// an option says otherwise: at scale a fence's collected data is hundreds
// of MiB.
const DefaultMaxMessageSize = direct.DefaultMaxMessageSize

// EnvLogLevel is the environment variable through which Start passes the
// host logger's level to the plugin, so that Serve's default logger does
// not write lines the host would drop.
const EnvLogLevel = "GOPMI_PLUGIN_LOG_LEVEL"
