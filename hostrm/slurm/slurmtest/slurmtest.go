// Package slurmtest runs gopmi's Slurm backend at scale in one process: the
// step's coordinator (package coord) and N node backends (slurm.Node),
// each with its authenticated link to the coordinator and its place in
// the fence tree, over loopback, as `srun --mpi=gopmi -N N` would run
// them on N hosts. It times a barrier (a fence that collects nothing), a
// collecting fence of a small part per node and a modex round (a barrier
// carrying each node's part, then reads of other nodes' parts by direct
// modex), and counts what the coordinator accepted and what each node
// costs in memory and open files.
//
// On this machine's cores the simulation does every node's work in turn,
// so its wall time grows with N where a real cluster's would not: the
// times a real cluster would see are estimated from costs measured here
// uncontended (Calibrate) and the tree's shape (Model).
//
// It is a test harness, for make bench's scale rows and the tests; no
// gopmi program links it.
package slurmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/hostrm/slurm/coord"
	"github.com/gopmi/gopmi/plugin"
)

// Options shape one simulated step.
type Options struct {
	Nodes int // simulated nodes, one rank each
	Width int // the fence tree's width
	// PartBytes is each node's part of the collecting fence and of the
	// modex round (default 64).
	PartBytes int
	// Reads is how many other nodes' parts each node reads by direct
	// modex in the modex round (default 4).
	Reads int
	// Rounds is how many times each phase runs; the times are medians
	// (default 3).
	Rounds int
	// Timeout bounds each fence (default 2 minutes).
	Timeout time.Duration
}

// Result is what one simulated step measured.
type Result struct {
	Nodes, Width, Depth int
	// Barrier, Collect and Modex are the simulation's wall times,
	// medians of the rounds: every node's call from start to answer.
	Barrier, Collect, Modex time.Duration
	// Setup is how long the nodes took to connect and configure.
	Setup time.Duration
	// CollectCPU is the CPU time (user and system, this process) a
	// collecting fence cost per node: every node's tree work, both ends
	// of its links and the coordinator's share, without a host's own
	// (its PMI wire, its ranks).
	CollectCPU time.Duration
	// CoordConns is how many connections the coordinator accepted.
	CoordConns int64
	// NodeMiB and NodeFiles are the memory (Go heap and stacks) and the
	// open files the step took per simulated node, both ends of its
	// links included, after a first fence formed the tree.
	NodeMiB, NodeFiles float64
}

func (o *Options) defaults() {
	if o.PartBytes <= 0 {
		o.PartBytes = 64
	}
	if o.Reads <= 0 {
		o.Reads = 4
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// step is one simulated step: its coordinator and nodes.
type step struct {
	o      Options
	job    plugin.Job
	nodes  []*slurm.Node
	cl     *countingListener
	stop   context.CancelFunc
	served chan error
}

// start brings the coordinator and the nodes up, each node configured
// (linked to the coordinator and placed in the tree).
func start(ctx context.Context, o Options) (*step, error) {
	if o.Nodes < 2 || o.Width < 1 {
		return nil, fmt.Errorf("slurmtest: %d nodes of width %d: want at least 2 nodes and width 1", o.Nodes, o.Width)
	}
	secret, err := slurm.NewSecret()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &step{o: o, cl: &countingListener{Listener: l}, served: make(chan error, 1)}
	c := coord.New(coord.Options{Listener: s.cl, Secret: secret, Logger: zerolog.Nop(),
		Cancel: func(context.Context, string) error { return nil }, Stdout: io.Discard, Stderr: io.Discard})
	cctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.served <- c.Run(cctx) }()

	s.job = plugin.Job{Nspace: "slurm.scale.0", Size: int32(o.Nodes), UniverseSize: int32(o.Nodes)}
	for i := range o.Nodes {
		// Each node its own loopback address, as each has its own
		// host on a cluster: the nodes listen on the same ports.
		addr := fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)
		s.job.Nodes = append(s.job.Nodes, plugin.Node{ID: int32(i), Name: "n" + strconv.Itoa(i), Ranks: []int32{int32(i)}, Addr: addr})
	}
	s.job.Apps = []plugin.App{{FirstRank: 0, Size: int32(o.Nodes), Cmd: "sim"}}
	args := []string{"-coordinator", l.Addr().String(), "-tree-width", strconv.Itoa(o.Width)}
	s.nodes = make([]*slurm.Node, o.Nodes)
	for i := range s.nodes {
		// As srun's shim runs them: the wait for the children's
		// answers at the ranks' finalize, not in every fence.
		// The tree, as Model has it, at every width (WithoutExchange).
		s.nodes[i] = slurm.NodeFromArgs(args, slurm.WithLogger(zerolog.Nop()), slurm.WithFinalizeDrain(), slurm.WithSecret(secret), slurm.WithoutExchange())
	}
	// Configure concurrently, as a step's nodes start, a few at a time
	// on this machine's cores.
	errs := make([]error, o.Nodes)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, errs[i] = n.Configure(ctx, &plugin.ConfigureRequest{APIVersion: plugin.APIVersion1, Job: s.job, NodeID: int32(i)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.close()
		return nil, fmt.Errorf("slurmtest: configure: %w", err)
	}
	return s, nil
}

func (s *step) close() {
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		if n != nil {
			wg.Go(func() { _ = n.Close() })
		}
	}
	wg.Wait()
	s.stop()
	<-s.served
}

// fence runs one fence on every node at once and returns when all are
// answered; each node's part is its rank's, with data when part is set.
func (s *step) fence(ctx context.Context, id string, collect bool, part func(i int) []byte) (time.Duration, error) {
	world := []plugin.Proc{{Nspace: s.job.Nspace, Rank: plugin.RankWildcard}}
	errs := make([]error, len(s.nodes))
	begin := time.Now()
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		wg.Go(func() {
			req := &plugin.FenceRequest{ID: id, Procs: world, LocalProcs: []plugin.Proc{{Nspace: s.job.Nspace, Rank: int32(i)}},
				Node: s.job.Nodes[i].Name, Collect: collect, Timeout: s.o.Timeout}
			if part != nil {
				req.Data = part(i)
			}
			resp, err := n.Fence(ctx, req)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			case collect && part != nil && len(resp.Data) != len(s.nodes)*s.o.PartBytes:
				errs[i] = fmt.Errorf("node %d: the collecting fence gave %d bytes, want %d", i, len(resp.Data), len(s.nodes)*s.o.PartBytes)
			}
		})
	}
	wg.Wait()
	return time.Since(begin), errors.Join(errs...)
}

// read times node i's read of node j's part by direct modex, checked.
func (s *step) read(ctx context.Context, i, j int) (time.Duration, error) {
	begin := time.Now()
	resp, err := s.nodes[i].DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: s.job.Nspace, Rank: int32(i)},
		Proc: plugin.Proc{Nspace: s.job.Nspace, Rank: int32(j)}, Timeout: s.o.Timeout})
	d := time.Since(begin)
	if err != nil {
		return 0, fmt.Errorf("node %d reading node %d: %w", i, j, err)
	}
	if want := partOf(j, s.o.PartBytes); !slices.Equal(resp.Data[max(0, len(resp.Data)-len(want)):], want) {
		return 0, fmt.Errorf("node %d reading node %d: got %d bytes, not its part", i, j, len(resp.Data))
	}
	return d, nil
}

// partOf is node i's part: its index, padded to size bytes.
func partOf(i, size int) []byte {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("part %d;", i))
	return b
}

// readBatch is how many nodes read at once in reads: each read makes a
// link, two open files, which thousands of nodes in one process would
// run out of; a batch's links are closed before the next batch reads.
const readBatch = 512

// reads has every node read k random other nodes' parts by direct modex,
// each checked, each over a new link, readBatch nodes at a time.
func (s *step) reads(ctx context.Context, k int, seed uint64) (time.Duration, error) {
	errs := make([]error, len(s.nodes))
	begin := time.Now()
	for from := 0; from < len(s.nodes); from += readBatch {
		s.readSome(ctx, k, seed, from, min(from+readBatch, len(s.nodes)), errs)
		for _, n := range s.nodes[from:min(from+readBatch, len(s.nodes))] {
			n.DropReadLinks()
		}
	}
	return time.Since(begin), errors.Join(errs...)
}

// readSome has nodes from..to-1 read as reads says.
func (s *step) readSome(ctx context.Context, k int, seed uint64, from, to int, errs []error) {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		n := s.nodes[i]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for range k {
				j := rng.IntN(len(s.nodes) - 1)
				if j >= i {
					j++
				}
				resp, err := n.DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: s.job.Nspace, Rank: int32(i)},
					Proc: plugin.Proc{Nspace: s.job.Nspace, Rank: int32(j)}, Timeout: s.o.Timeout})
				if err != nil {
					errs[i] = fmt.Errorf("node %d reading node %d: %w", i, j, err)
					return
				}
				if want := partOf(j, s.o.PartBytes); !slices.Equal(resp.Data[max(0, len(resp.Data)-len(want)):], want) {
					errs[i] = fmt.Errorf("node %d reading node %d: got %d bytes, not its part", i, j, len(resp.Data))
					return
				}
			}
		})
	}
	wg.Wait()
}

// Run simulates one step and measures it.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	m0, f0 := settled(), openFiles()
	t0 := time.Now()
	s, err := start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &Result{Nodes: o.Nodes, Width: o.Width, Depth: Depth(o.Nodes, o.Width)}
	// A first barrier forms the tree: each child dials its parent.
	if _, err := s.fence(ctx, "warm", false, nil); err != nil {
		return nil, fmt.Errorf("slurmtest: the first barrier: %w", err)
	}
	r.Setup = time.Since(t0)
	runtime.GC()
	r.NodeMiB = float64(int64(memNow())-int64(m0)) / float64(o.Nodes) / (1 << 20)
	r.NodeFiles = float64(openFiles()-f0) / float64(o.Nodes)
	var barrier, collect, modex []time.Duration
	var collectCPU time.Duration
	for round := range o.Rounds {
		d, err := s.fence(ctx, fmt.Sprintf("barrier/%d", round), false, nil)
		if err != nil {
			return nil, fmt.Errorf("slurmtest: barrier: %w", err)
		}
		barrier = append(barrier, d)
		c0 := cpuNow()
		d, err = s.fence(ctx, fmt.Sprintf("collect/%d", round), true, func(i int) []byte { return partOf(i, o.PartBytes) })
		if err != nil {
			return nil, fmt.Errorf("slurmtest: collecting fence: %w", err)
		}
		collectCPU += cpuNow() - c0
		collect = append(collect, d)
	}
	r.CollectCPU = collectCPU / time.Duration(o.Rounds*o.Nodes)
	// The modex round: a barrier with the parts, which stay each on its
	// node; then reads, each from the node that holds the part. Once: a node's data accumulates over
	// fences.
	d, err := s.fence(ctx, "modex", false, func(i int) []byte { return partOf(i, o.PartBytes) })
	if err != nil {
		return nil, fmt.Errorf("slurmtest: modex barrier: %w", err)
	}
	// Once too: every read makes a new link, as a step's first reads
	// do.
	rd, err := s.reads(ctx, o.Reads, 1)
	if err != nil {
		return nil, fmt.Errorf("slurmtest: direct modex: %w", err)
	}
	modex = append(modex, d+rd)
	r.Barrier, r.Collect, r.Modex = median(barrier), median(collect), median(modex)
	r.CoordConns = s.cl.n.Load()
	return r, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// settled is memNow once an earlier step's links have wound down.
func settled() uint64 {
	for last := uint64(0); ; time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		m := memNow()
		if last != 0 && m >= last*99/100 {
			return m
		}
		last = m
	}
}

// memNow is the Go heap and stacks in use.
func memNow() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// cpuNow is the CPU time this process used so far, user and system.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFiles counts this process's open files.
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// Depth is how many links the deepest node's calls cross to reach the
// coordinator in a tree of width w over n nodes.
func Depth(n, w int) int {
	// Node index i's parent is i/w - 1 (-1: the coordinator), and
	// the last node is among the deepest.
	d := 0
	for i := n - 1; i >= 0; i = i/w - 1 {
		d++
	}
	return d
}

// Costs are what the step's links and coordinator cost on this machine,
// measured uncontended: a few nodes, one fence at a time. Model scales
// them to N nodes on N hosts.
type Costs struct {
	// Hop is what one more tree level adds to a fence: a part's trip up
	// one authenticated link and the answer's down, with the node's
	// handling (a chain of width 1, 3 nodes against 2).
	Hop time.Duration
	// Part is the coordinator's time per part it receives in a fence
	// (a star of 64 nodes against 2, every part a call of its own): an
	// upper bound, since the nodes' sending shares this machine's cores
	// with it.
	Part time.Duration
	// Read is one direct-modex read of another node over a link made
	// before: a round trip to the node that holds the data.
	Read time.Duration
	// Dial is what a read of a node not read before adds: its link
	// (TCP, TLS and the secret's proof both ways).
	Dial time.Duration
	// ByteNs is the nanoseconds per byte of a collecting fence's answer
	// that a node (or the coordinator) sends down to a child (64 nodes'
	// parts of 4 KiB against 64 B, per byte of the answers sent).
	ByteNs float64
}

// calibrationRounds is how many fences each calibration times; the
// costs come from medians.
const calibrationRounds = 41

// timeFences starts a step of n nodes of width w and returns the median
// time of f, run calibrationRounds times after a first untimed one.
func timeFences(ctx context.Context, n, w int, f func(s *step, round int) (time.Duration, error)) (time.Duration, error) {
	o := Options{Nodes: n, Width: w}
	o.defaults()
	s, err := start(ctx, o)
	if err != nil {
		return 0, err
	}
	defer s.close()
	var ds []time.Duration
	for round := range calibrationRounds + 1 {
		d, err := f(s, round)
		if err != nil {
			return 0, err
		}
		if round > 0 {
			ds = append(ds, d)
		}
	}
	return median(ds), nil
}

// Calibrate measures the costs.
func Calibrate(ctx context.Context) (*Costs, error) {
	type phase = func(s *step, round int) (time.Duration, error)
	barrier := func(s *step, round int) (time.Duration, error) {
		return s.fence(ctx, fmt.Sprintf("cal-barrier/%d", round), false, nil)
	}
	collect := func(size int) phase {
		return func(s *step, round int) (time.Duration, error) {
			s.o.PartBytes = size
			return s.fence(ctx, fmt.Sprintf("cal-collect/%d", round), true, func(i int) []byte { return partOf(i, size) })
		}
	}
	// Node 0 reads one node per round: the same one (warm), or one it
	// never read (cold, a new link each round).
	read := func(cold bool) phase {
		return func(s *step, round int) (time.Duration, error) {
			if round == 0 {
				if _, err := s.fence(ctx, "cal-modex", false, func(i int) []byte { return partOf(i, s.o.PartBytes) }); err != nil {
					return 0, err
				}
			}
			j := 1
			if cold {
				j = round + 1
			}
			return s.read(ctx, 0, j)
		}
	}
	// Each cost is the difference between two shapes' medians.
	shapes := []struct {
		n, w int
		f    phase
	}{
		{2, 1, collect(64)}, {3, 1, collect(64)}, // a chain: one more level
		{2, 64, barrier}, {64, 64, barrier}, // a star: 62 more parts
		{calibrationRounds + 2, 64, read(false)}, {calibrationRounds + 2, 64, read(true)}, // a new link per read
		{64, 64, collect(64)}, {64, 64, collect(4096)}, // bigger parts
	}
	// The process's first step runs slower (its heap and the TLS
	// code warm up): a step is run once untimed first.
	if _, err := timeFences(ctx, 2, 1, collect(64)); err != nil {
		return nil, err
	}
	t := make([]time.Duration, len(shapes))
	for i, sh := range shapes {
		var err error
		if t[i], err = timeFences(ctx, sh.n, sh.w, sh.f); err != nil {
			return nil, err
		}
	}
	return &Costs{
		Hop:  max(t[1]-t[0], 0),
		Part: max((t[3]-t[2])/62, 0),
		Read: t[4],
		Dial: max(t[5]-t[4], 0),
		// The coordinator sent every node the 64 parts:
		// 64*64*(4096-64) bytes more.
		ByteNs: max(float64(t[7]-t[6])/float64(64*64*(4096-64)), 0),
	}, nil
}

// Estimate is the time a phase would take on a real cluster of N hosts
// with the costs measured here: the critical path through the tree.
type Estimate struct {
	Barrier, Collect, Modex time.Duration
}

// Model estimates each phase's critical path for n nodes of width w, with
// parts of partBytes and reads direct-modex reads per node (d is the
// tree's depth). It is a lower bound: it counts the tree's work and the
// links', not a host's own (its PMI wire, its shim) nor waiting for a
// core.
//   - barrier: d hops, and the coordinator's w parts (a barrier's parts
//     are joined at each level, without data: each node keeps its own):
//     d*Hop + w*Part;
//   - collect: the same, and at each level the whole answer (n parts)
//     sent to each of a node's w children in turn:
//     d*Hop + w*Part + d*w*n*partBytes*ByteNs;
//   - modex: a barrier, then each node's reads, each from a node it did
//     not read before, straight from that node (every node serves about
//     as many reads as it makes, all at once across the cluster):
//     barrier + reads*(Dial+Read).
func Model(c *Costs, n, w, partBytes, reads int) Estimate {
	depth := Depth(n, w)
	d := time.Duration(depth)
	fan := min(w, n)
	barrier := d*c.Hop + time.Duration(fan)*c.Part
	bytes := float64(depth) * float64(fan) * float64(n*partBytes) * c.ByteNs
	return Estimate{
		Barrier: barrier,
		Collect: barrier + time.Duration(bytes),
		Modex:   barrier + time.Duration(reads)*(c.Dial+c.Read),
	}
}
