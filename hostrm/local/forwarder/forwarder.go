package forwarder

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
)

// EnvUniverse names the environment variable holding the universe's
// address, one of the three ways a Backend learns it.
const EnvUniverse = "GOPMI_UNIVERSE"

// Config is the JSON a launcher puts in the shim bootstrap's
// backend.config; the shim hands it to Configure unchanged.
type Config struct {
	// Universe is the address to Dial ("unix:///path/universe.sock").
	Universe string `json:"universe"`
}

// Backend is the backend inside gopmi-rm-local: a plugin.Relay that dials
// the universe of the `gopmi run` that started the job and forwards every
// call to it, returning the universe's answers and errors unchanged.
//
// The address comes from, in this order: the -universe flag among the
// process's arguments (bootstrap backend.args), the GOPMI_UNIVERSE
// environment variable (the backend inherits the shim's environment), or
// the "universe" field of the Configure config JSON. GetInfo comes before
// Configure, so a launcher passes the flag or the variable; gopmi run
// passes all three.
type Backend struct {
	*plugin.Relay // forwards every call but Configure

	args   []string
	getenv func(string) string
	dial   func(ctx context.Context, target string) (*link.Conn, error)

	mu   sync.Mutex
	addr string // guarded by mu; "" until known
}

var _ plugin.Full = (*Backend)(nil)

// New returns a Backend reading the process's arguments and environment.
// It dials on the first call.
func New() *Backend {
	return newBackend(os.Args[1:], os.Getenv)
}

// FromArgs is New with the arguments given, as the bootstrap's backend
// spec has them: the backend served inside the shim's own process
// (gopmi-pmix serves gopmi run's so).
func FromArgs(args []string) *Backend {
	return newBackend(args, os.Getenv)
}

func newBackend(args []string, getenv func(string) string) *Backend {
	f := &Backend{args: args, getenv: getenv, dial: link.Dial}
	f.Relay = plugin.NewRelay(f.dialUniverse)
	return f
}

// address finds the universe's address in the arguments or environment.
func (f *Backend) address() string {
	fs := flag.NewFlagSet("gopmi-rm-local", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("universe", "", "")
	if fs.Parse(f.args) == nil && *addr != "" {
		return *addr
	}
	return f.getenv(EnvUniverse)
}

// dialUniverse is the Relay's dial.
func (f *Backend) dialUniverse(ctx context.Context) (plugin.Full, io.Closer, error) {
	f.mu.Lock()
	if f.addr == "" {
		f.addr = f.address()
	}
	addr := f.addr
	f.mu.Unlock()
	if addr == "" {
		return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-local: no universe address (pass -universe, set %s or the \"universe\" config field): gopmi-rm-local only works under gopmi run", EnvUniverse)
	}
	c, err := f.dial(ctx, addr)
	if err != nil {
		return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "gopmi-rm-local: dial universe %s", addr)
	}
	return c.Backend(), c, nil
}

// Configure takes the universe address from the config if none is known
// yet, and forwards the request unchanged.
func (f *Backend) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	if len(bytes.TrimSpace(req.Config)) > 0 {
		var cfg Config
		dec := json.NewDecoder(bytes.NewReader(req.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "gopmi-rm-local configure: config %q: %v", strings.TrimSpace(string(req.Config)), err)
		}
		f.mu.Lock()
		if cfg.Universe != "" {
			if !f.Connected() {
				// Not dialled yet: the config is the launcher's latest word.
				f.addr = cfg.Universe
			} else if cfg.Universe != f.addr {
				f.mu.Unlock()
				return nil, plugin.Errorf(plugin.ErrInvalidArgument, "gopmi-rm-local configure: config names universe %s, already connected to %s", cfg.Universe, f.addr)
			}
		}
		f.mu.Unlock()
	}
	return f.Relay.Configure(ctx, req)
}
