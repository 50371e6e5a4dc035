//go:build pmix

package pmix

// What the engine asks of libpmix (engine.Lib).

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/pmix/engine"
)

// lib is libpmix, as the engine sees it.
type lib struct{}

var _ engine.Lib = lib{}

// AskData asks libpmix for a local client's data in the direct-modex
// form: the answer comes to goDmodexAnswer with id.
func (lib) AskData(p plugin.Proc, id uint64) error {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	return status(C.gopmi_dmodex_request(ns, C.uint32_t(p.Rank), C.uintptr_t(id)))
}

// Deliver gives this node's clients an event a client raised on another
// node.
func (lib) Deliver(code int, e plugin.Event) error {
	rank := uint32(e.Source.Rank)
	if e.Source.Rank == plugin.RankWildcard {
		rank = uint32(C.PMIX_RANK_WILDCARD)
	}
	ks, vs := cArray(len(e.Info)), cArray(len(e.Info))
	defer ks.free()
	defer vs.free()
	for i, in := range e.Info {
		ks.set(i, in.Key)
		vs.set(i, in.Value)
	}
	ns := C.CString(e.Source.Nspace)
	defer C.free(unsafe.Pointer(ns))
	return status(C.gopmi_notify(C.int(code), ns, C.uint32_t(rank), C.int(pmixRange(e.Range)), ks.p, vs.p, C.size_t(len(e.Info))))
}

// Register registers job's layout with libpmix, with the ranks of its
// node index ni as local (none for -1: another job's, which local clients
// reach after a spawn or a connect).
func (lib) Register(job plugin.Job, ni int) error {
	size := int(job.Size)
	localRank := make([]C.uint32_t, size)
	nodeID := make([]C.uint32_t, size)
	appnum := make([]C.uint32_t, size)
	var names, ppn []string
	for _, n := range job.Nodes {
		names = append(names, n.Name)
		ranks := engine.NodeRanks(n)
		var rs []string
		for i, r := range ranks {
			localRank[r] = C.uint32_t(i)
			nodeID[r] = C.uint32_t(n.ID)
			rs = append(rs, strconv.Itoa(int(r)))
		}
		ppn = append(ppn, strings.Join(rs, ","))
	}
	for r, a := range job.AppRanks() {
		appnum[r] = C.uint32_t(a)
	}
	var local []int32
	if ni >= 0 {
		local = engine.NodeRanks(job.Nodes[ni])
	}
	leader := C.uint32_t(0)
	if len(local) > 0 {
		leader = C.uint32_t(local[0])
	}
	ns := C.CString(job.Nspace)
	defer C.free(unsafe.Pointer(ns))
	cnodes, cppn, cpeers := C.CString(strings.Join(names, ",")), C.CString(strings.Join(ppn, ";")), C.CString(plugin.PeerList(local))
	defer C.free(unsafe.Pointer(cnodes))
	defer C.free(unsafe.Pointer(cppn))
	defer C.free(unsafe.Pointer(cpeers))
	univ := job.UniverseSize
	if univ < job.Size {
		univ = job.Size
	}
	apps := len(job.Apps)
	if apps == 0 {
		apps = 1
	}
	// The arrays stay Go memory, pinned while C reads them through the
	// job's struct (a Go pointer inside memory passed to C must be).
	var pin runtime.Pinner
	defer pin.Unpin()
	var zero C.uint32_t
	ptr := func(xs []C.uint32_t) *C.uint32_t {
		p := &zero
		if len(xs) > 0 {
			p = &xs[0]
		}
		pin.Pin(p)
		return p
	}
	// The node's hwloc topology, probed once per process (without I/O
	// devices: 3 ms on this VM; face_server.c): Open MPI otherwise probes the machine in each
	// rank, PCI bus included, which at 64 ranks on 2 nodes of 2 cores
	// doubled a hello's CPU time (1.5x the wall of Slurm's --mpi=pmix,
	// which hands its topology over too). nil: each rank probes.
	var topo *C.char
	if ni >= 0 {
		topo = C.gopmi_topology_xml()
		defer C.free(unsafe.Pointer(topo))
	}
	// Node rank and local rank are the same here: one job per server.
	cj := C.struct_gopmi_job{
		nspace: ns, nodes: cnodes, ppn: cppn,
		size: C.uint32_t(job.Size), univ_size: C.uint32_t(univ), num_nodes: C.uint32_t(len(job.Nodes)), num_apps: C.uint32_t(apps),
		local_peers: cpeers, nlocal: C.uint32_t(len(local)), local_leader: leader,
		nprocs: C.uint32_t(size), local_rank: ptr(localRank), node_rank: ptr(localRank), node_id: ptr(nodeID), appnum: ptr(appnum),
		topology: topo,
	}
	if err := status(C.gopmi_register_nspace(&cj)); err != nil {
		return fmt.Errorf("pmix: register job %s: %w", job.Nspace, err)
	}
	return nil
}
