package bridge

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

// FenceMode chooses how fences behave for a job.
type FenceMode int

const (
	// FenceCollect: every fence blocks until all ranks arrived and brings
	// every rank's data to every node (Slurm-style allgather).
	FenceCollect FenceMode = iota
	// FenceLazy: a PMI-2 kvs-fence returns at once and a get of a key not
	// yet known waits until the fence completed (Hydra-style). PMI-1
	// barriers still block. Data is collected.
	FenceLazy
	// FenceModex: fences are barriers that carry no data back; a get of a
	// key not held locally asks the backend for the owner's data.
	FenceModex
)

// Limits are advertised to clients and enforced. Zero fields take the
// defaults (256, 64, 1024, 1 MiB).
type Limits struct {
	KvsnameMax int
	KeyMax     int
	ValMax     int
	LineMax    int
	// KVSMax bounds the bytes of KVS records this node holds for the job:
	// every put of its tasks and every record fences and direct modex
	// bring from other nodes (a key put twice counts twice). A put past
	// it is refused, a fence or get that would bring more fails.
	KVSMax int64
}

// Timeouts bound every wait. Zero fields take the defaults.
type Timeouts struct {
	Fence    time.Duration // default 120s
	Get      time.Duration // lazy get and direct modex; default Fence
	Lookup   time.Duration // name lookup with wait; default 60s
	NodeAttr time.Duration // info-getnodeattr wait; default Fence
	Spawn    time.Duration // default 120s
	Backend  time.Duration // any other backend call; default 30s
}

// Clock is the time source: crew's, whose Fake tests pass.
type Clock = crew.Clock

// Config describes the job as seen from this node.
type Config struct {
	Job    plugin.Job
	NodeID int32
	// Preput entries are in the KVS before any task starts.
	Preput []plugin.Info
	// Attrs are extra job attributes (served to info-getjobattr and get).
	Attrs     []plugin.Info
	Limits    Limits
	Timeouts  Timeouts
	FenceMode FenceMode
	// PMIDebug is served as pmiverbose / debug.
	PMIDebug bool
	// KVSHeld, when set, is told how many bytes of KVS records the job
	// holds on this node each time that moved by a MiB or more, and 0
	// once the job ended; the host may tune its memory to it. It is
	// called with the job's lock held and must not call the job.
	KVSHeld func(bytes int64)
	// PortSecret is the job's PMI_PORT secret: a PMI-2 client proves it
	// knows it with fullinit authtype=challenge-sha256 (see AttachPort).
	PortSecret string
	// Backend is the job's backend, which may still be starting: requests
	// that need it wait for it, the others never do.
	Backend *Backend
	// Clock is nil for real time.
	Clock  Clock
	Logger zerolog.Logger

	// tap, set by this package's tests, observes the job's goroutines.
	tap tap
}

// Sender writes encoded bytes to one task's connection. Send must not block
// for long; the shim buffers.
type Sender interface {
	Send(b []byte) error
	// Close closes the connection (after finalize or a fatal error).
	Close() error
}

// Result is how the job ended on this node.
type Result struct {
	// Aborted is set when a task called abort; Status is its exit code.
	Aborted bool
	Status  int
	// Err is set when the job failed: a task ended before finalize, a
	// fence could not complete, the backend went away.
	Err error
}
