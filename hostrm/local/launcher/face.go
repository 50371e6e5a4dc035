package launcher

// face is how a job's tasks reach their PMI server, decided once when
// the launcher is made (Config.PMIx, Config.PMIPort, an Open MPI program
// found by itself): every place a launch differs by it asks the face.
type face int

const (
	// faceFD: PMI-1 and PMI-2 on each task's inherited socket (PMI_FD).
	faceFD face = iota
	// facePort: the same over a loopback TCP port (PMI_PORT, PMI_ID),
	// which a task's process claims with its rank.
	facePort
	// facePMIx: PMIx through libpmix, a gopmi-pmix on every node.
	facePMIx
)

// faceOf is the face Config asks for.
func faceOf(cfg Config) face {
	switch {
	case cfg.PMIx:
		return facePMIx
	case cfg.PMIPort:
		return facePort
	}
	return faceFD
}

// pmix reports whether the tasks are PMIx clients.
func (f face) pmix() bool { return f == facePMIx }

// server is the binary of a node's server process: gopmi-shim, or
// gopmi-pmix for PMIx tasks.
func (f face) server() string {
	if f == facePMIx {
		return PMIxBinary
	}
	return ShimBinary
}

// taskFD is the name of rank r's inherited socket in the bootstrap, ""
// when its tasks have none.
func (f face) taskFD(r int32) string {
	if f == faceFD {
		return taskFDName(r)
	}
	return ""
}

// needsShims reports whether every node of a job gets a server process
// of its own: with simulated nodes, and always for PMIx (libpmix serves
// only in a process of its own).
func (f face) needsShims(ppn int) bool { return ppn > 0 || f == facePMIx }

// tasksAfterReady reports whether the tasks start only once their
// node's server is ready: a PMIx client whose job its server has not
// registered yet is refused at once, and the tasks' environment comes
// with the server's READY. Other tasks start while their servers come
// up: their first request waits in their socket.
func (f face) tasksAfterReady() bool { return f == facePMIx }

// endsSeenHere reports whether a task's end before finalize is seen only
// by the launcher (a PMIx task's, whose connection libpmix holds), not by
// its server as a closed connection.
func (f face) endsSeenHere() bool { return f == facePMIx }
