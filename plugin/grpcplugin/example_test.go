package grpcplugin_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

// myBackend is a vendor's backend: the core calls it implements, the rest
// answered by plugin.Unimplemented.
type myBackend struct {
	plugin.Unimplemented
}

func (myBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "mine", Version: "0.1.0", APIVersions: []string{plugin.APIVersion1}}, nil
}

// A backend binary's main is one call.
func ExampleServe() {
	// func main() {
	grpcplugin.Serve(myBackend{})
	// }
}

// The host starts a backend binary, calls it, and closes it.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path:      "/usr/libexec/gopmi/gopmi-rm-mine",
		SocketDir: "/run/gopmi/job42",
		Logger:    zerolog.New(os.Stderr),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println(c.Info().Name)
	_, err = c.Backend().Fence(ctx, &plugin.FenceRequest{ID: "world/1", Collect: true})
	fmt.Println(err)
}
