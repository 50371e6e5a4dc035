// Package link carries the plugin contract between two processes of the
// local resource manager over a unix socket, as JSON: `gopmi run` serves
// its universe with Serve, and each gopmi-rm-local (package forwarder)
// reaches it with Dial. It is the resource manager's own transport, the
// way a resource manager's backend reaches its node or step daemon, not
// the vendor contract (go-plugin gRPC, package grpcplugin): it exists so
// that `gopmi run` links no gRPC. Linking gRPC cost every run about 0.5
// ms of CPU and 190 page faults at start-up on this project's machine
// kind, for the -ppn path alone.
//
// # Wire
//
// One stream connection carries many calls at once, each frame a JSON
// value written whole on a line of its own (json.Encoder ends each with a
// newline; a server reads a frame to its newline, bounded by its Limits):
//
//	caller:  {"id":7,"call":"fence","req":{...plugin.FenceRequest...}}
//	         {"id":7,"cancel":true}           the caller gave up
//	server:  {"id":7,"resp":{...plugin.FenceResponse...}}
//	         {"id":7,"err":{"kind":"timed out","msg":"fence world/3 ...: ranks 4-7 (node vm-1) did not arrive in 30s"}}
//
// Requests and responses are the plugin package's types as encoding/json
// writes them. An error travels as its message and the text of the
// plugin sentinel it wraps (plugin.KindOf), so errors.Is holds on the
// caller's side; a call cancelled by the caller ends the server's context
// for it. A connection that breaks fails every call in flight with
// plugin.ErrUnavailable. There is no authentication: the socket lives in
// a directory only its users can reach, or its server knows each caller
// from the kernel (the node daemon) and bounds what it may make the server
// hold (Limits).
package link

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gopmi/gopmi/plugin"
)

// request is a caller's frame.
type request struct {
	ID     uint64          `json:"id"`
	Call   string          `json:"call,omitempty"`
	Req    json.RawMessage `json:"req,omitempty"`
	Cancel bool            `json:"cancel,omitempty"`
}

// response is the server's frame.
type response struct {
	ID   uint64          `json:"id"`
	Resp json.RawMessage `json:"resp,omitempty"`
	Err  *wireError      `json:"err,omitempty"`
}

// wireError is an error as it travels.
type wireError struct {
	Kind string `json:"kind,omitempty"`
	Msg  string `json:"msg"`
}

// toWire keeps err's message and the sentinel it wraps. A backend gone
// behind the server is, to the caller, an upstream that is unavailable.
func toWire(err error) *wireError {
	kind := plugin.KindOf(err)
	if kind == plugin.ErrBackendGone {
		kind = plugin.ErrUnavailable
	}
	w := &wireError{Msg: err.Error()}
	if kind != nil {
		w.Kind = kind.Error()
	}
	return w
}

// fromWire rebuilds an error with the same message for which errors.Is
// holds for the same sentinel.
func (w *wireError) fromWire() error {
	for _, k := range plugin.Kinds() {
		if w.Kind == k.Error() {
			return plugin.Errorf(k, "%s", w.Msg)
		}
	}
	if w.Kind != "" {
		return fmt.Errorf("%s (kind %q)", w.Msg, w.Kind)
	}
	return errors.New(w.Msg)
}
