package plugin

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Contract versions. GetInfo lists the versions a backend speaks and
// Configure carries the one the host chose. A 1.1 backend also lists
// 1.0: what 1.1 adds is answers, not calls, so a 1.0 host is served.
const (
	// APIVersion1 is the first contract.
	APIVersion1 = "1.0"
	// APIVersion11 adds the query vocabulary (query.go): a Querier
	// answers its keys by their PMIx names (and 1.0's), in its formats,
	// the proc table as JSON rows of ProcInfo, not text lines. The
	// conformance suite checks it of a backend that lists 1.1. Node.Addr
	// is new in 1.1 too, and so is AwaitEvents (EventWatcher, capability
	// "events"), with EventRequest.Node and clients' events
	// (EventClientPrefix).
	APIVersion11 = "1.1"
	// APIVersion12 adds Depart (Departer, capability "depart"): a node's
	// host that ends before its job hands the backend what the node
	// holds, so that it stays readable until the job ends. A 1.2
	// backend lists 1.0 and 1.1 too; a host that finds no "depart"
	// calls nothing new.
	APIVersion12 = "1.2"
	// APIVersion13 adds FenceRequest.HandOver, which declares a node's
	// hand-over of its data, which a backend before it tells only by
	// its shape (a fence of the node's own processes alone). A 1.3
	// backend lists 1.0 to 1.2 too.
	APIVersion13 = "1.3"
)

// Capability names a backend lists in BackendInfo.Capabilities, one per
// optional interface it implements for real.
const (
	CapPublish = "publish" // Publisher
	CapSpawn   = "spawn"   // Spawner
	CapConnect = "connect" // Connector
	CapQuery   = "query"   // Querier
	CapLog     = "log"     // Logger
	CapNotify  = "notify"  // EventNotifier
	CapEvents  = "events"  // EventWatcher
	CapDepart  = "depart"  // Departer
)

// RankWildcard in a Proc means every rank of the namespace.
const RankWildcard int32 = -1

// Proc names one process: its job (namespace) and its rank in that job.
type Proc struct {
	Nspace string
	Rank   int32
}

// ProcSet is procs sorted (by namespace, then rank, the wildcard first)
// without repeats, and its text ("a:0;a:1;b:*;"): every host that names
// the same participants of a collective gets the same text, whatever
// their order, so it can key the collective.
func ProcSet(procs []Proc) ([]Proc, string) {
	ps := slices.Clone(procs)
	slices.SortFunc(ps, func(a, b Proc) int {
		if c := strings.Compare(a.Nspace, b.Nspace); c != 0 {
			return c
		}
		return cmp.Compare(a.Rank, b.Rank)
	})
	ps = slices.Compact(ps)
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteByte(';')
	}
	return ps, b.String()
}

// String formats p as "nspace:rank", or "nspace:*" for the wildcard.
func (p Proc) String() string {
	if p.Rank == RankWildcard {
		return p.Nspace + ":*"
	}
	return p.Nspace + ":" + strconv.Itoa(int(p.Rank))
}

// Info is one key/value datum or directive. PMI keys and values are text.
type Info struct {
	Key   string
	Value string
}

// Range scopes a published name (PMIx data range).
type Range int32

const (
	// RangeDefault lets the backend choose; it means RangeSession.
	RangeDefault Range = iota
	// RangeLocal: procs on the same node.
	RangeLocal
	// RangeNamespace: procs of the publisher's job.
	RangeNamespace
	// RangeSession: the publisher's job and every job it spawned or that
	// shares its allocation or launcher.
	RangeSession
	// RangeGlobal: every job the backend can reach.
	RangeGlobal
)

// Persistence says how long a published name lives.
type Persistence int32

const (
	// PersistDefault lets the backend choose; it means PersistSession.
	PersistDefault Persistence = iota
	// PersistIndefinite: until unpublished.
	PersistIndefinite
	// PersistFirstRead: deleted by the first lookup that returns it.
	PersistFirstRead
	// PersistProc: until the publishing process exits.
	PersistProc
	// PersistApp: until the publishing job ends.
	PersistApp
	// PersistSession: until the session (allocation, launcher) ends.
	PersistSession
)

// BackendInfo describes a backend to the host.
type BackendInfo struct {
	Name         string   // short name, e.g. "local", "slurm"
	Version      string   // the backend's own version
	APIVersions  []string // contract versions it speaks, e.g. APIVersion1
	Capabilities []string // Cap* names of the optional interfaces it implements
}

// Node is one node of a job and the ranks it hosts.
type Node struct {
	ID    int32
	Name  string
	Ranks []int32
	// Addr is the node's network address as the resource manager knows
	// it (Slurm's NodeAddr), when it gives one: a backend that links its
	// nodes to each other dials it. Empty: Name is the address. Since
	// APIVersion11; a 1.0 peer ignores it.
	Addr string
}

// App is one executable of a job: its ranks are FirstRank..FirstRank+Size-1,
// or those in Ranks when it is set, and MPI_APPNUM is its index in
// Job.Apps.
type App struct {
	FirstRank int32
	Size      int32
	Cmd       string
	// Ranks, when set, are the app's ranks, not necessarily consecutive
	// (srun --multi-prog "0,2 a.out"); Size is their number and FirstRank
	// their lowest.
	Ranks []int32
}

// AppRanks is each rank's app index (its MPI_APPNUM) in j.Apps: 0 for every
// rank when j has no apps. Ranks outside 0..Size-1 are ignored.
func (j Job) AppRanks() []int32 {
	out := make([]int32, max(j.Size, 0))
	for i, a := range j.Apps {
		set := func(r int32) {
			if r >= 0 && r < j.Size {
				out[r] = int32(i)
			}
		}
		if len(a.Ranks) > 0 {
			for _, r := range a.Ranks {
				set(r)
			}
			continue
		}
		for r := a.FirstRank; r < a.FirstRank+a.Size; r++ {
			set(r)
		}
	}
	return out
}

// Job is the layout of a job as the host knows it.
type Job struct {
	Nspace       string
	Size         int32
	UniverseSize int32
	Nodes        []Node
	Apps         []App
	// Parent is the namespace of the job that spawned this one, if any.
	Parent string
}

// ConfigureRequest registers the calling shim's job and node with the
// backend. It is the first call after GetInfo.
type ConfigureRequest struct {
	APIVersion string
	Job        Job
	NodeID     int32  // the caller's entry in Job.Nodes
	Config     []byte // backend-specific configuration, opaque to gopmi
}

// ConfigureResponse may add job attributes the backend owns (served to
// PMI-2 info-getjobattr and PMI-1 get), e.g. PMI_hwloc_xmlfile.
type ConfigureResponse struct {
	Attrs []Info
}

// ClientRequest reports that tasks initialized or finalized PMI. The host
// batches the tasks of a node that did so close together into one call, so
// a thousand-rank job costs a handful of calls, not thousands; a task is
// always reported connected before it is reported finalized.
type ClientRequest struct {
	Procs []Proc
	Info  []Info
}

// AbortRequest asks the RM to end processes with an exit status.
type AbortRequest struct {
	Proc    Proc   // who asked
	Status  int32  // the exit status the job should end with
	Message string // human-readable reason
	// Targets are the processes to end; empty means Proc's whole job.
	// gopmi's hosts name at most the caller itself (MPI_Abort on a
	// communicator smaller than the world: MPICH still ends the job, and
	// the RM may end just the caller's job). A Target in another job (a
	// job connected to Proc's) is ended with its job by an RM that allows
	// it; one that does not refuses with ErrPermission naming the job,
	// and still ends Proc's job.
	Targets []Proc
}

// FenceRequest is one node's part of a collective. The host calls Fence
// once per node per fence, after every local participant arrived, and
// only when the participants span more than one node: a fence within one
// node has nothing to exchange and completes in the host. One exception:
// a host hands the backend data of some or all of a node's processes for
// DirectModex as a Fence whose participants are all local (Procs and
// LocalProcs the same), without Collect, which the backend completes at
// once and keeps like any other contribution: a job on one node
// publishes its fence data for other jobs so (ID "publish:<node>/<n>"),
// once its backend is up, and the PMIx face its clients' data when they
// first commit or connect to another job ("pmix:modex:<node>/<n>").
type FenceRequest struct {
	// ID names the collective; it is the same on every node for the same
	// fence (e.g. "world/3"), so a backend matches calls by (nspace, ID).
	ID string
	// Procs are all participants. {nspace, RankWildcard} means the job.
	Procs []Proc
	// LocalProcs are the participants the calling node hosts: the backend
	// counts arrivals with them and names the missing ones on a time-out.
	LocalProcs []Proc
	// Node is the caller's node name, for messages.
	Node string
	// Data is the node's contribution: an opaque blob the host can parse
	// when concatenated with other nodes' blobs.
	Data []byte
	// Collect asks for every participant's data in the response. Without
	// it the backend keeps each node's data for DirectModex and returns
	// none; it is still a barrier: each call returns only once every
	// node arrived.
	Collect bool
	// Timeout bounds the whole collective, from the first node's arrival
	// (zero: DefaultFenceTimeout, never "at once"). When it passes, every node still waiting fails with ErrTimeout and
	// a message that names the procs or nodes missing, and a node that
	// arrives later fails at once with the same error: a timed-out fence
	// never completes.
	Timeout time.Duration
	// HandOver (new in 1.3) says the fence is a node's hand-over of its
	// own processes' data, not a collective: every participant is among
	// LocalProcs, nothing is collected, and the backend keeps Data
	// readable by direct modex (by readers elsewhere) and answers at
	// once. gopmi's hosts make one when a rank publishes data between
	// fences (PMI-1's and PMI-2's puts after the last fence, a PMIx
	// client's commit). A backend before 1.3 ignores it and completes
	// the fence of one node it is, which is the same thing.
	HandOver bool
}

// DepartRequest is a node's host's last word for a job (Departer): every
// local process of the job finalized, and every fence the node entered
// completed, so that the backend holds all it will be given.
type DepartRequest struct {
	// Procs are the node's processes of the job.
	Procs []Proc
	// Node is the departing node's name, for messages.
	Node string
	// Data is the node's data that the callee does not hold yet: a host
	// leaves it empty (its backend holds every fence's part it was
	// given); a backend that keeps its node's parts itself and relays to
	// another (a node of a fence tree to the step's coordinator) hands
	// them on in it.
	Data []byte
}

// FenceResponse carries the concatenation, in any order, of the Data of
// every participating node when Collect was set.
type FenceResponse struct {
	Data []byte
}

// ModexRequest fetches the data a remote process contributed (direct modex).
// The host asks after a fence without Collect, for a key it does not hold;
// PMI-1 gets name no owner, so Proc.Rank may be RankWildcard: then the
// answer is every node's data, and the requestor's own node (whose data
// the host holds) is not waited for. Proc.Nspace may be another job's (a
// get after job-connect, or of a spawned child's keys).
//
// The backend waits until the target's node has contributed to a fence
// (with or without Collect), at most Timeout (zero: DefaultFenceTimeout),
// then fails with ErrTimeout naming the node. A job it does not know is
// ErrNotFound at once, naming it. The data is opaque to the backend: it
// cannot wait for a particular key, and is not asked to.
type ModexRequest struct {
	Requestor Proc
	Proc      Proc // whose data; RankWildcard: every rank's
	Timeout   time.Duration
}

// ModexResponse carries the blobs the target's node contributed to the
// job's fences so far, concatenated (the same format as FenceResponse.Data).
type ModexResponse struct {
	Data []byte
}

// PublishRequest publishes names (MPI_Publish_name). A name already
// visible to the publisher, or whose new entry would be visible to an
// existing name's publisher, is ErrAlreadyExists; a refused Publish
// publishes none of its names. RangeNamespace limits a name to the
// publisher's job on every node; PersistFirstRead names go with the first
// Lookup that returns them. A Range or Persistence the backend does not
// implement, and every Info key it does not know, is refused with
// ErrNotSupported naming it: a name must never be seen more widely, or
// live longer, than asked.
type PublishRequest struct {
	Proc        Proc
	Data        []Info
	Range       Range
	Persistence Persistence
	Info        []Info // other directives; unknown ones are refused by name
}

// LookupRequest looks names up (MPI_Lookup_name). A name that is not
// published is ErrNotFound at once, unless Wait: then the call waits until
// every key is published, and fails with ErrTimeout, naming the keys
// missing, when Timeout passes (zero: DefaultLookupTimeout). Without
// Wait, Timeout bounds only the call itself (a backend that asks its
// daemon). The shim never waits: PMI's lookup does not, so it sends
// Wait=false. A lookup whose context ends returns at once, with
// ErrAborted or the context's error.
type LookupRequest struct {
	Proc    Proc
	Keys    []string
	Range   Range
	Wait    bool
	Timeout time.Duration
	Info    []Info
}

// Published is one name found by Lookup.
type Published struct {
	Key       string
	Value     string
	Publisher Proc
}

// LookupResponse holds what was found; a key not found is left out, and a
// lookup that found none of its keys returns ErrNotFound.
type LookupResponse struct {
	Data []Published
}

// UnpublishRequest removes names: each of Keys, or, with no Keys, every
// name Proc published in Range (in any range for RangeDefault) and no
// other. An unknown Info key is refused with ErrNotSupported naming it,
// as by Publish and Lookup.
type UnpublishRequest struct {
	Proc  Proc
	Keys  []string // empty: every name Proc published in Range
	Range Range
	Info  []Info
}

// SpawnApp is one executable of a spawn request.
type SpawnApp struct {
	Cmd      string
	Argv     []string // arguments, not including Cmd
	Env      []string // KEY=VALUE added to the spawned tasks' environment
	Cwd      string
	MaxProcs int32
	// Info holds the remaining PMI info keys of this command. The backend
	// honours each key or refuses the spawn with ErrNotSupported naming it.
	Info []Info
}

// SpawnRequest starts a new job (MPI_Comm_spawn, MPI_Comm_spawn_multiple).
type SpawnRequest struct {
	Requestor Proc
	JobInfo   []Info
	Apps      []SpawnApp
	// Preput keys are in the new job's KVS before its tasks start.
	Preput  []Info
	Timeout time.Duration
}

// SpawnResponse names the new job.
type SpawnResponse struct {
	Nspace string
}

// ConnectRequest connects processes of several jobs (RFC0003).
type ConnectRequest struct {
	Procs   []Proc
	Info    []Info
	Timeout time.Duration
}

// ConnectResponse identifies the connection.
type ConnectResponse struct {
	ID string
}

// DisconnectRequest undoes a Connect.
type DisconnectRequest struct {
	Procs   []Proc
	Info    []Info
	Timeout time.Duration
}

// Query is one question: keys and the qualifiers that scope them.
type Query struct {
	Keys       []string
	Qualifiers []Info
}

// QueryRequest asks the RM about jobs, processes and nodes.
type QueryRequest struct {
	Proc    Proc
	Queries []Query
}

// QueryResponse answers with key/values; a key the backend cannot answer
// is left out, and a query none of whose keys it knows is ErrNotFound.
type QueryResponse struct {
	Results []Info
}

// LogRequest logs on a process's behalf.
type LogRequest struct {
	Proc       Proc
	Data       []Info
	Directives []Info
}

// EventCode names an event.
type EventCode string

// Events the host reports.
const (
	// EventProcAborted: a task ended before finalize, or aborted.
	EventProcAborted EventCode = "proc-aborted"
	// EventProcTerminated: a task finalized and its connection closed.
	// gopmi's hosts do not send it today; see "Lifetimes" in the package
	// documentation for how a backend learns that processes and jobs end.
	EventProcTerminated EventCode = "proc-terminated"
)

// EventClientPrefix begins the code of an event a client raised for
// processes beyond its node (PMIx_Notify_event with a range wider than
// the node): "pmix:" and the PMIx status in decimal ("pmix:-131"). A
// backend with the capability "events" keeps such events for
// AwaitEvents; one without ignores them, as any code it does not know.
const EventClientPrefix = "pmix:"

// EventRequest reports an event beyond the node.
type EventRequest struct {
	Code   EventCode
	Source Proc
	Range  Range
	Info   []Info
	// Node is the node whose host reports it (new in 1.1): that host
	// gave the event to its own clients already, and skips it when it
	// comes back through AwaitEvents.
	Node string
}

// AwaitEventsRequest asks for the clients' events that a job's processes
// are to hear (EventClientPrefix): those whose source is in the job and
// whose range is RangeNamespace, and those of range RangeSession,
// RangeGlobal or RangeDefault from any job of the backend's.
type AwaitEventsRequest struct {
	Nspace string
	// After is the Seq of the last event the caller has; 0: from the
	// oldest the backend keeps.
	After uint64
	// Timeout is how long to wait when there is none after After; zero:
	// answer at once.
	Timeout time.Duration
}

// AwaitEventsResponse is the events after the request's After, oldest
// first; none when its Timeout passed first.
type AwaitEventsResponse struct {
	Events []Event
	// Missed: the backend no longer keeps some events after After (it
	// keeps a bounded number).
	Missed bool
}

// Event is one event kept for AwaitEvents, numbered in the order the
// backend got them (Seq counts from 1).
type Event struct {
	Seq uint64
	EventRequest
}

// Default time-outs, the contract's answer to a zero Timeout: a backend
// applies them to a request that carries none, and gopmi's hosts use them
// when nothing configures otherwise.
const (
	// DefaultFenceTimeout bounds a Fence, and a DirectModex, whose
	// Timeout is zero.
	DefaultFenceTimeout = 120 * time.Second
	// DefaultLookupTimeout bounds a Lookup whose Timeout is zero.
	DefaultLookupTimeout = 60 * time.Second
	// DefaultSpawnTimeout bounds a Spawn whose Timeout is zero.
	DefaultSpawnTimeout = 120 * time.Second
	// DefaultStartTimeout bounds a backend's start: its process's start
	// and handshake, and GetInfo and Configure.
	DefaultStartTimeout = 30 * time.Second
)

// TimeoutOr is d, or def when d is zero (or negative): what a zero
// Timeout means is the contract's, said once here, for the contract's
// defaults (the requests' TimeoutOrDefault) and a backend's own.
func TimeoutOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// TimeoutOrDefault is the fence's time-out: Timeout, or
// DefaultFenceTimeout when zero.
func (r *FenceRequest) TimeoutOrDefault() time.Duration {
	return TimeoutOr(r.Timeout, DefaultFenceTimeout)
}

// TimeoutOrDefault is the direct modex's time-out: Timeout, or
// DefaultFenceTimeout when zero.
func (r *ModexRequest) TimeoutOrDefault() time.Duration {
	return TimeoutOr(r.Timeout, DefaultFenceTimeout)
}

// TimeoutOrDefault is a waiting lookup's time-out: Timeout, or
// DefaultLookupTimeout when zero.
func (r *LookupRequest) TimeoutOrDefault() time.Duration {
	return TimeoutOr(r.Timeout, DefaultLookupTimeout)
}

// TimeoutOrDefault is the spawn's time-out: Timeout, or
// DefaultSpawnTimeout when zero.
func (r *SpawnRequest) TimeoutOrDefault() time.Duration {
	return TimeoutOr(r.Timeout, DefaultSpawnTimeout)
}
