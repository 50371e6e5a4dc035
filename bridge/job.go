package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

// Job is the PMI engine for one job on one node. It is safe for
// concurrent use: the shim calls Session methods from one goroutine per
// connection, and backend calls complete on goroutines of the Job's own
// (see calls). Each concern has a type of its own; j.mu guards them all.
type Job struct {
	cfg   Config
	lay   *layout
	be    *Backend
	log   zerolog.Logger
	attrs map[string]string // job attributes; read-only after NewJob

	needOnce sync.Once // asks for the backend, once
	calls    *calls    // backend calls and timers off the Session's goroutine
	done     chan struct{}

	mu    sync.Mutex
	tasks map[int32]*task // one per local rank
	store *kvs.Store      // the committed KVS
	// held is the bytes of KVS records held for the job on this node:
	// puts not yet fenced, fence data on its way, the store's records
	// (see Limits.KVSMax).
	held     int64
	heldSaid int64 // what cfg.KVSHeld was last told
	kvsFull  bool  // a put was refused for the limit (logged once)
	// spacesGone are the extra key spaces destroyed on this node.
	spacesGone map[string]bool
	fences     fenceTable            // open fences, finished sequences, carried data
	lazy       waits[int]            // gets waiting for a world fence, by its sequence
	nodeAttrs  map[string]string     // info-putnodeattr
	attrWaits  waits[string]         // info-getnodeattr with wait, by key
	modex      modexTable            // direct modex per node in flight, and done
	pending    map[*request]struct{} // requests owed an answer (the job's end gives it)
	notices    notices               // ClientConnected/ClientFinalized batches
	depart     departure             // the node's hand-over at its last finalize
	ended      bool
	// aborting: a task aborted the job, which ends with the abort once
	// the RM's call is on its way; a connection closing meanwhile (the RM
	// kills the tasks when it hears) must not end it first.
	aborting bool
	result   Result
}

// task is one local rank.
type task struct {
	rank      int32
	sess      *Session
	inited    bool
	finalized bool
	aborted   bool
	closed    bool
	pending   kvs.Buffer     // puts since the task's last fence
	spaces    int            // extra key spaces it created (create_kvs)
	seq       map[string]int // fences entered per group
}

// NewJob builds the engine. It calls no backend method: the host brings
// the backend up (GetInfo, Configure) and says so through cfg.Backend.
func NewJob(ctx context.Context, cfg Config) (*Job, error) {
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	lay, err := buildLayout(&cfg)
	if err != nil {
		return nil, err
	}
	be := cfg.Backend
	if be == nil {
		return nil, errors.New("bridge config: no backend")
	}
	clock := cfg.Clock
	if clock == nil {
		clock = crew.Real{}
	}
	j := &Job{
		cfg:        cfg,
		lay:        lay,
		be:         be,
		log:        cfg.Logger.With().Str("job", cfg.Job.Nspace).Int32("node", cfg.NodeID).Logger(),
		calls:      newCalls(ctx, clock, cfg.tap),
		done:       make(chan struct{}),
		tasks:      make(map[int32]*task, len(lay.local)),
		store:      kvs.NewStore(),
		spacesGone: map[string]bool{},
		fences:     newFenceTable(),
		nodeAttrs:  make(map[string]string),
		pending:    make(map[*request]struct{}),
	}
	for _, r := range lay.local {
		j.tasks[r] = &task{rank: r, seq: make(map[string]int)}
	}
	for _, p := range cfg.Preput {
		rec := kvs.Record{Rank: -1, Key: p.Key, Value: p.Value}
		j.store.Put(rec)
		j.held += int64(kvs.RecordSize(rec))
	}
	j.attrs = j.jobAttrs()
	if len(lay.local) == 0 {
		j.end(Result{})
	}
	return j, nil
}

// jobAttrs are served to info-getjobattr and, for PMI-1, to get.
func (j *Job) jobAttrs() map[string]string {
	a := map[string]string{
		"PMI_process_mapping": j.lay.mapping,
		"universeSize":        fmt.Sprint(j.universeSize()),
		"PMI_dead_processes":  "",
	}
	for _, kv := range j.cfg.Attrs {
		a[kv.Key] = kv.Value
	}
	return a
}

func (j *Job) universeSize() int32 {
	if u := j.cfg.Job.UniverseSize; u > 0 {
		return u
	}
	return j.cfg.Job.Size
}

// proc names a rank of this job.
func (j *Job) proc(rank int32) plugin.Proc {
	return plugin.Proc{Nspace: j.cfg.Job.Nspace, Rank: rank}
}

// Attach opens a session for the connection of a known local rank
// (PMI_FD). Replies go to out.
func (j *Job) Attach(rank int32, out Sender) (*Session, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.tasks[rank]
	if !ok {
		return nil, fmt.Errorf("attach: rank %d is not on node %d", rank, j.cfg.NodeID)
	}
	if t.sess != nil {
		return nil, fmt.Errorf("attach: rank %d already has a connection", rank)
	}
	s := newSession(j, out)
	s.rank = rank
	t.sess = s
	return s, nil
}

// AttachPort opens a session for a connection accepted on the PMI_PORT
// listener; the rank is bound by initack or fullinit. A peer that is not
// the job's user (peer.Owner false) must authenticate first, and each rank
// is claimed by one connection only.
func (j *Job) AttachPort(out Sender, peer PortPeer) *Session {
	s := newSession(j, out)
	s.rank = -1
	s.port = &peer
	return s
}

// Bound reports whether a PMI_PORT session has claimed its rank (and so,
// for a peer not of the job's user, passed the challenge first).
func (s *Session) Bound() bool {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	return s.rank >= 0
}

// bind ties a port session to a rank (initack pmiid=, or fullinit).
func (j *Job) bind(s *Session, rank int32) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.tasks[rank]
	if !ok {
		return fmt.Errorf("rank %d is not a task of job %s on this node", rank, j.cfg.Job.Nspace)
	}
	if t.sess != nil && t.sess != s {
		first := t.sess.port.String()
		j.log.Warn().Int32("rank", rank).Str("peer", s.port.String()).Str("first", first).
			Msg("PMI_PORT: a second connection claimed a rank; refused")
		return fmt.Errorf("rank %d was already claimed by another connection (%s); each PMI_ID is claimed once", rank, first)
	}
	t.sess = s
	s.rank = rank
	return nil
}

// heldStep is how far j.held moves before cfg.KVSHeld hears of it.
const heldStep = 1 << 20

// noteHeldLocked tells the host what the job holds when it moved enough.
func (j *Job) noteHeldLocked() {
	if j.cfg.KVSHeld == nil {
		return
	}
	held := j.held
	if j.ended {
		held = 0
	}
	if d := held - j.heldSaid; d >= heldStep || d <= -heldStep || (held == 0 && j.heldSaid != 0) {
		j.heldSaid = held
		j.cfg.KVSHeld(held)
	}
}
