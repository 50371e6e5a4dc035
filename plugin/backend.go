package plugin

import "context"

// Backend is the core every RM backend implements. Every method takes a
// context that carries the deadline; a backend must return when it ends.
type Backend interface {
	// GetInfo names the backend, its contract versions and capabilities.
	GetInfo(ctx context.Context) (*BackendInfo, error)
	// Configure registers the caller's job and node; it comes right after
	// GetInfo. It must be idempotent: a host may call it again for the
	// same job and node (after a retry, say), and a backend that serves
	// several nodes gets one call per node.
	Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error)
	// ClientConnected reports that tasks initialized PMI.
	ClientConnected(ctx context.Context, req *ClientRequest) error
	// ClientFinalized reports that tasks finalized PMI.
	ClientFinalized(ctx context.Context, req *ClientRequest) error
	// Abort ends processes with a status. The backend fails every
	// pending wait of the aborted job (fences, direct modex) at once with
	// ErrAborted, and so every later Fence or DirectModex of that job:
	// nothing of an aborted job may wait out its time-out. See
	// AbortRequest for Targets.
	Abort(ctx context.Context, req *AbortRequest) error
	// Fence exchanges the nodes' data of one collective. Calls are
	// matched by the job (the namespace of req.Procs) and req.ID: two jobs
	// may run a fence of the same ID at once.
	Fence(ctx context.Context, req *FenceRequest) (*FenceResponse, error)
	// DirectModex fetches one remote process's data.
	DirectModex(ctx context.Context, req *ModexRequest) (*ModexResponse, error)
}

// Publisher is the name service (MPI_Publish_name and friends).
type Publisher interface {
	Publish(ctx context.Context, req *PublishRequest) error
	Lookup(ctx context.Context, req *LookupRequest) (*LookupResponse, error)
	Unpublish(ctx context.Context, req *UnpublishRequest) error
}

// Spawner starts new jobs (MPI_Comm_spawn).
type Spawner interface {
	Spawn(ctx context.Context, req *SpawnRequest) (*SpawnResponse, error)
}

// Connector connects and disconnects jobs (PMI-2 job-connect).
type Connector interface {
	Connect(ctx context.Context, req *ConnectRequest) (*ConnectResponse, error)
	Disconnect(ctx context.Context, req *DisconnectRequest) error
}

// Querier answers questions about jobs, processes and nodes.
type Querier interface {
	Query(ctx context.Context, req *QueryRequest) (*QueryResponse, error)
}

// Logger logs on a process's behalf (PMIx log).
type Logger interface {
	Log(ctx context.Context, req *LogRequest) error
}

// EventNotifier delivers events beyond the node.
type EventNotifier interface {
	NotifyEvent(ctx context.Context, req *EventRequest) error
}

// EventWatcher hands a node's host the clients' events raised beyond
// other nodes, so that it gives them to its own clients (PMIx event
// notification).
type EventWatcher interface {
	// AwaitEvents waits for events a job's processes are to hear. A
	// host keeps one such call open per job it serves, from the Seq of
	// the last event it got.
	AwaitEvents(ctx context.Context, req *AwaitEventsRequest) (*AwaitEventsResponse, error)
}

// Departer keeps a node's data readable after the node's host ended.
// Each fence's part a node gave (Fence's Data, which DirectModex serves)
// belongs to the job, not to the node: data put in a job stays readable
// until the job ends, whichever node finishes first. A backend whose
// node's parts live in the node's own process (a fence tree's node) must
// hand them elsewhere before that process ends; one that holds them
// elsewhere already (the local universe, a daemon) answers at once.
type Departer interface {
	// Depart is a node's host's last call for a job on several nodes,
	// made once every local process of the job finalized and every
	// fence the node entered completed, before it answers the last
	// finalize. It returns once the node's parts are readable without
	// the node; the host (and a backend in its process) may then end.
	Depart(ctx context.Context, req *DepartRequest) error
}

// FinalizeDrainer is a backend in its host's own process through which
// other nodes' answers pass (a fence tree's interior node: package
// hostrm/slurm, WithFinalizeDrain). Its host answers a rank's finalize
// only once DrainBeforeFinalize returned, so that the rank's exit cannot
// end the process under an answer still on its way. It is never served
// over the contract's gRPC: a backend in a process of its own must not
// count on it.
type FinalizeDrainer interface {
	DrainBeforeFinalize(ctx context.Context)
}

// Full is a backend with every capability. The host holds one; Complete
// builds it from any Backend.
type Full interface {
	Backend
	Publisher
	Spawner
	Connector
	Querier
	Logger
	EventNotifier
	EventWatcher
	Departer
}

// Complete returns b as a Full: optional methods b lacks answer
// ErrNotSupported.
func Complete(b Backend) Full {
	if f, ok := b.(Full); ok {
		return f
	}
	return &completed{Backend: b}
}

type completed struct {
	Backend
}
