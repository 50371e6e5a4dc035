package plugin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The query vocabulary: the keys a Querier answers about jobs, processes
// and nodes, their qualifiers, and their answers' formats, the same from
// every backend (the local universe, a Slurm step's coordinator, the node
// daemon) and for every caller (the shim, `gopmi query`, a PMIx tool).
// Keys and qualifiers carry PMIx's names (RFC0010, pmix_common.h) where
// PMIx has one; gopmi's own keys start with "gopmi.". A backend answers
// the keys it can; Query leaves out the others (see QueryResponse).
//
// Values are text: lists are comma-separated, as PMIx's are, and tables
// are JSON arrays of the types below (EncodeProcTable, DecodeProcTable),
// never lines a caller must parse.
const (
	// QueryNamespaces is every job the caller may see, comma-separated,
	// oldest first: "gopmi.812.0,gopmi.812.1". PMIX_QUERY_NAMESPACES.
	// The node daemon, which keeps a job an hour after it ended, lists
	// only those that have not ended (PMIx's active namespaces); QueryJobs
	// has the others.
	QueryNamespaces = "pmix.qry.ns"
	// QueryJobStatus is a job's state (qualifier QualNspace, default the
	// requestor's job): a JobState, then ": " and why when it is not
	// running or finished. PMIX_QUERY_JOB_STATUS.
	QueryJobStatus = "pmix.qry.jst"
	// QueryProcTable is a job's processes (qualifier QualNspace, default
	// the requestor's job): a JSON array of ProcInfo, by rank.
	// PMIX_QUERY_PROC_TABLE.
	QueryProcTable = "pmix.qry.ptable"
	// QueryLocalProcTable is QueryProcTable for the processes on one node
	// (qualifiers QualNspace and QualNodeID or QualHostname, default the
	// requestor's node). PMIX_QUERY_LOCAL_PROC_TABLE.
	QueryLocalProcTable = "pmix.qry.lptable"
	// QueryLocalPeers is a job's ranks on one node (qualifiers as
	// QueryLocalProcTable), ascending, comma-separated: "0,1,2,3".
	// PMIX_LOCAL_PEERS.
	QueryLocalPeers = "pmix.lpeers"
	// QueryNodeList is the nodes of a job (qualifier QualNspace), by node
	// ID, comma-separated. PMIX_NODE_LIST.
	QueryNodeList = "pmix.nlist"

	// QueryJobs is every job the caller may see, with its owner, size,
	// nodes and state (`gopmi ps`): a JSON array of JobInfo.
	QueryJobs = "gopmi.ps"
	// QueryNames is every published name the caller may see: a JSON
	// array of NameInfo.
	QueryNames = "gopmi.names"
	// QueryJobLog is what the caller's jobs logged, and what their host
	// noted about them (qualifier QualNspace: one job), oldest first: a
	// JSON array of LogEntry (`gopmi log`).
	QueryJobLog = "gopmi.log"
)

// Qualifiers of the query keys.
const (
	// QualNspace names the job a key is about. PMIX_NSPACE.
	QualNspace = "pmix.nspace"
	// QualNodeID names a node by its ID in the job's layout. PMIX_NODEID.
	QualNodeID = "pmix.nodeid"
	// QualHostname names a node by its name. PMIX_HOSTNAME.
	QualHostname = "pmix.hname"
)

// queryAliases are the names gopmi 1.0's backends and `gopmi query`
// used, still accepted.
var queryAliases = map[string]string{
	"namespaces":  QueryNamespaces,
	"job-status":  QueryJobStatus,
	"proc-table":  QueryProcTable,
	"local-peers": QueryLocalPeers,
	"node-list":   QueryNodeList,
	"nspace":      QualNspace,
	"nodeid":      QualNodeID,
	"node":        QualHostname,
}

// QueryKey is the vocabulary's name for key: an alias ("proc-table",
// "nodeid", ...) becomes its PMIx name; other keys are returned as they
// are.
func QueryKey(key string) string {
	if k, ok := queryAliases[key]; ok {
		return k
	}
	return key
}

// Qualifier returns the value of the qualifier key (by its vocabulary
// name; aliases in qs count) and whether qs has it.
func Qualifier(qs []Info, key string) (string, bool) {
	for _, q := range qs {
		if QueryKey(q.Key) == key {
			return q.Value, true
		}
	}
	return "", false
}

// JobState is a job's state, as QueryJobStatus starts.
type JobState string

// Job states.
const (
	JobRunning  JobState = "running"
	JobFinished JobState = "finished"
	JobAborted  JobState = "aborted" // a process called abort
	JobFailed   JobState = "failed"  // a process ended before finalize, or the launch failed
	JobLost     JobState = "lost"    // its host stopped answering
)

// JobStatus formats a QueryJobStatus answer: state, and why when given.
func JobStatus(state JobState, why string) string {
	if why == "" {
		return string(state)
	}
	return string(state) + ": " + why
}

// ProcState is one process's state in a proc table.
type ProcState string

// Process states, in the order a process goes through them.
const (
	ProcPending    ProcState = "pending"    // not started yet
	ProcStarted    ProcState = "started"    // running, PMI not initialized
	ProcConnected  ProcState = "connected"  // PMI initialized
	ProcFinalized  ProcState = "finalized"  // PMI finalized, still running
	ProcTerminated ProcState = "terminated" // PMI finalized and its connection closed
	ProcExited     ProcState = "exited"     // ended; ExitStatus says how
	ProcAborted    ProcState = "aborted"    // called abort
	ProcFailed     ProcState = "failed"     // ended before finalize
	ProcUnknown    ProcState = "unknown"    // its host does not know (the node daemon's registry)
)

// ProcInfo is one process of a job, a row of QueryProcTable: the fields
// of PMIx's pmix_proc_info_t.
type ProcInfo struct {
	Rank  int32     `json:"rank"`
	Node  string    `json:"node"`
	PID   int       `json:"pid,omitempty"` // 0 until known
	State ProcState `json:"state"`
	// App is the process's executable.
	App string `json:"app,omitempty"`
	// ExitStatus is how an exited process ended: its exit code, or 128
	// plus the signal that ended it. Meaningful in state ProcExited.
	ExitStatus int `json:"exit_status,omitempty"`
	// Signal names the signal that ended it ("KILL"), if one did.
	Signal string `json:"signal,omitempty"`
}

// EncodeProcTable formats a proc table answer.
func EncodeProcTable(procs []ProcInfo) string {
	if procs == nil {
		procs = []ProcInfo{}
	}
	return EncodeAnswer(procs)
}

// EncodeAnswer formats a JSON answer of the vocabulary: a slice of
// ProcInfo, JobInfo, NameInfo or LogEntry.
func EncodeAnswer[T ProcInfo | JobInfo | NameInfo | LogEntry](rows []T) string {
	b, err := json.Marshal(rows)
	if err != nil {
		// Only strings, numbers and times: it cannot fail.
		panic(fmt.Sprintf("query answer: %v", err))
	}
	return string(b)
}

// DecodeProcTable reads a proc table answer.
func DecodeProcTable(v string) ([]ProcInfo, error) {
	var procs []ProcInfo
	if err := json.Unmarshal([]byte(v), &procs); err != nil {
		return nil, fmt.Errorf("proc table: %w", err)
	}
	return procs, nil
}

// PeerList formats ranks as QueryLocalPeers does: "0,1,2,3".
func PeerList(ranks []int32) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(int(r))
	}
	return strings.Join(s, ",")
}

// JobInfo is one job as QueryJobs shows it.
type JobInfo struct {
	Nspace string `json:"nspace"`
	// Run names what launched it: one `gopmi run` with every job it
	// spawned, or a Slurm step.
	Run     string    `json:"run"`
	UID     uint32    `json:"uid"`
	User    string    `json:"user"`
	PID     int       `json:"pid"` // the run's process
	Cmd     string    `json:"cmd,omitempty"`
	Size    int32     `json:"size"`
	Nodes   []string  `json:"nodes"`
	Pids    []int     `json:"pids,omitempty"`
	State   string    `json:"state"` // as QueryJobStatus
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// NameInfo is one published name as QueryNames shows it.
type NameInfo struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Publisher string `json:"publisher"`
	UID       uint32 `json:"uid"`
	Run       string `json:"run"`
	// Lasts says how long the name lives: "run" (until unpublished or the
	// publishing run ends), "job" (its job ends), "process" (its process
	// ends), "first-read", or "unpublished" (until unpublished, across
	// runs and restarts).
	Lasts string `json:"lasts"`
}

// Lasts is NameInfo.Lasts for a persistence.
func Lasts(p Persistence) string {
	switch p {
	case PersistProc:
		return "process"
	case PersistApp:
		return "job"
	case PersistFirstRead:
		return "first-read"
	case PersistIndefinite:
		return "unpublished"
	default:
		return "run"
	}
}

// LogEntry is one line of a job's log, as QueryJobLog shows it.
type LogEntry struct {
	Time time.Time `json:"time"`
	Job  string    `json:"job"`
	// User is who owns the job (another user's job may share a name
	// with yours).
	User string `json:"user,omitempty"`
	// From is "daemon" (its host's own note) or "run" (what the run
	// sent: how it ended).
	From string `json:"from"`
	// Kind is the run's key for the line ("status", "line"), or the
	// host's level.
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}
