package shim

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

// maxBootstrap bounds what is read from stdin.
const maxBootstrap = 64 << 20

// readBootstrap reads the whole of r and parses it as protojson: the
// plain form step daemons write by decodeFast, anything else by protojson
// itself; plain reports which.
func readBootstrap(r io.Reader) (b *shimv1.Bootstrap, plain bool, err error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBootstrap+1))
	if err != nil {
		return nil, false, fmt.Errorf("%w: read stdin: %w", serve.ErrUsage, err)
	}
	if len(data) > maxBootstrap {
		return nil, false, fmt.Errorf("%w: stdin: longer than %d bytes", serve.ErrUsage, maxBootstrap)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, false, fmt.Errorf("%w: stdin: empty; the step daemon writes a gopmi.shim.v1.Bootstrap as protojson and closes stdin", serve.ErrUsage)
	}
	if b, ok := decodeFast(data); ok {
		return b, true, nil
	}
	b = &shimv1.Bootstrap{}
	// DiscardUnknown stays false: a field this shim does not know is a
	// launcher newer than the shim, and silently ignoring it would serve
	// the job wrongly. protojson's message names the field.
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, b); err != nil {
		return nil, false, fmt.Errorf("%w: parse protojson: %w", serve.ErrUsage, err)
	}
	return b, false, nil
}

// notPlainMsg is the shim's warning about a bootstrap protojson had to
// read; the Slurm tests look for it in the nodes' logs.
const notPlainMsg = "bootstrap: not in the plain form (read by protojson): its writer does not follow plugin/internal/forwardgen"

// parseBootstrap reads and validates the bootstrap, and reports whether
// it was in the plain form.
func parseBootstrap(r io.Reader) (*serve.Config, bool, error) {
	b, plain, err := readBootstrap(r)
	if err != nil {
		return nil, false, err
	}
	c, err := serve.NewConfig(b)
	return c, plain, err
}
