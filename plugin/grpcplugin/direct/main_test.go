package direct_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testBackend echoes a fence's data, blocks on fence "block", and fails
// the fences of errByID with their error.
type testBackend struct {
	plugin.Unimplemented
}

// errByID has one error per sentinel the wire maps, and one without.
var errByID = map[string]error{
	"not-supported": fmt.Errorf("fence x: option y: %w", plugin.ErrNotSupported),
	"not-found":     fmt.Errorf("fence x: no job z: %w", plugin.ErrNotFound),
	"timeout":       fmt.Errorf("fence world/3: ranks 4-7 (node n1) did not arrive in 30s: %w", plugin.ErrTimeout),
	"aborted":       fmt.Errorf("fence x: job aborted: %w", plugin.ErrAborted),
	"unavailable":   fmt.Errorf("fence x: node n2 unreachable: %w", plugin.ErrUnavailable),
	"plain":         errors.New("fence x: something broke"),
}

func (testBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "testrm", APIVersions: []string{plugin.APIVersion1}}, nil
}

func (testBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if err, ok := errByID[req.ID]; ok {
		return nil, err
	}
	if req.ID == "block" {
		<-ctx.Done()
		return nil, fmt.Errorf("fence block: %w", ctx.Err())
	}
	return &plugin.FenceResponse{Data: req.Data}, nil
}
