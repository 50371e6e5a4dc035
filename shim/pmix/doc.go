// Package pmix is gopmi's PMIx face: it makes a gopmi process a PMIx
// server through the reference library (OpenPMIx 4.2, libpmix, by cgo),
// so that PMIx clients — Open MPI, PMIx-built MPICH, the PMIx tools —
// are served by the same plugin.Backend as the PMI-1 and PMI-2 faces.
// It maps libpmix's server module onto the backend contract: a client's
// connection and finalize, abort, and fence (the node's packed blob is
// FenceRequest.Data; the concatenation of every node's comes back).
//
// The package builds only with the build tag "pmix" and libpmix's headers
// (Debian's libpmix-dev): gopmi's PMI-1 and PMI-2 binaries stay pure Go
// and never load libpmix; only a process that serves PMIx pays for it.
//
// libpmix holds one server per process, so a process has one Server. Its
// callbacks (callbacks.go) run on libpmix's progress thread: each copies
// its arguments and asks the engine (package engine, pure Go: what to do,
// tested without libpmix), returns at once, and the backend's answer goes
// back through the callback libpmix gave, from a goroutine of the
// server's crew.
package pmix
