package direct_test

import (
	"context"
	"fmt"
	"net"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// myBackend is a vendor's backend: the core calls it implements, the rest
// answered by plugin.Unimplemented.
type myBackend struct {
	plugin.Unimplemented
}

func (myBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "mine", Version: "0.1.0", APIVersions: []string{plugin.APIVersion1}}, nil
}

// A daemon serves its backend on a socket; per-node callers dial it.
func ExampleServe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := net.Listen("unix", "/run/gopmi/rm.sock")
	if err != nil {
		fmt.Println(err)
		return
	}
	go direct.Serve(ctx, l, myBackend{})

	conn, err := direct.Dial(ctx, "unix:///run/gopmi/rm.sock")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	info, err := conn.Backend().GetInfo(ctx)
	fmt.Println(info, err)
}
