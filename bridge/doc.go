// Package bridge is gopmi's PMI engine: the state of one job on one node
// and the decisions PMI-1 and PMI-2 requests call for. It owns no sockets
// and no processes. The shim feeds it the bytes each task writes
// (Session.Feed) and writes out what it sends back (Sender); everything
// that crosses the node goes to a plugin.Full backend.
//
// Data flow for one fence (PMI-1 barrier_in, PMI-2 kvs-fence):
//
//	task puts ──► per-task pending records
//	every local participant arrived ──► one backend Fence for the node,
//	    carrying the node's records as a kvs blob
//	merged blob ──► the node's committed kvs.Store ──► every get
//
// Fences are matched across nodes by an ID made of the group and its
// sequence number ("world/3"), so every node issues the same IDs in the
// same order. FenceCollect blocks each fence until every rank's data is
// here; FenceLazy answers a PMI-2 kvs-fence at once and makes a get of a
// missing key wait for the fence (what MPICH's "-NONEXIST-KEY" get relies
// on under Hydra); FenceModex sends no data back and fetches a missing key
// from its owner through DirectModex.
//
// Requests are served from the protocols' command tables (pmi1.Commands,
// pmi2.Commands): dispatch.go checks each request against its command's
// entry, and the handlers read its attributes through it, so an absent
// attribute means the table's default and nothing else.
//
// # Concurrency model
//
// A Session never blocks: Feed parses, decides and either answers at
// once or parks the request (Job.pending) until something answers it.
// Everything off the Session's goroutine goes through the job's calls
// (lifecycle.go), on the job's crew (plugin/crew, the one owner of
// goroutines and timers gopmi has): each backend call on a goroutine of
// its own with a deadline, and the timers of the waits; nothing else
// starts a goroutine or arms a timer, so Shutdown waits for all of it. Work that needs a
// backend still starting waits at the backend gate (gate.go) as a
// callback on the Backend, not as a blocked goroutine. One lock, j.mu,
// guards the job's state, which is split by concern: the tasks, the
// committed store, the fence table (fence.go), the parked waits (one
// generic timed wait list, waits.go), the direct modex table, the node
// attributes and the notices batch.
//
// Tests count the goroutines the job starts (Config.tap) and the backend
// calls their fake RM holds, so they wait until the job is quiet, never
// for a time: after that every reply the job will send without more input
// has been sent. The golden transcripts (testdata/golden) record each
// request in, each reply and each backend call out, in the one order
// that gives; go test -run TestTranscripts -rewrite writes them.
//
// Files follow the concerns: dispatch.go, handle1.go and handle2.go take
// a request to its handler; get.go (put, get, lazy gets, direct modex),
// attrs.go (node and job attributes), fence.go, ring.go, names.go,
// connect.go, spawn.go serve them; lifecycle.go holds the job's
// goroutines, its end, init and finalize notices and abort.
//
// Every wait has a deadline from Timeouts, measured with the Clock, so a
// test drives time by hand. Every request gets an answer: unsupported ones
// and failures get rc!=0 with a message that names what is missing or who
// did not arrive. A task that closes its connection after init but before
// finalize fails the job: pending requests are answered with an error, the
// backend hears of it, and Done closes with Result.Err set.
package bridge
